"""The host-consumer fact (`perflint.facts.host_use`): does a value kept on the device reach
a host read as often as it is made? Fixes that turn a host read into a tensor rely on it."""

from __future__ import annotations

import ast
import textwrap

import pytest

from perflint.facts.analysis import FileAnalysis
from perflint.facts.context import RuleContext
from perflint.source import SourceFile


def reaches(code: str) -> list[bool]:
    """For each `<x>.sum()` call (no arguments) in `code`, in source order: does its value
    reach a host consumer?"""
    source = SourceFile(path="t.py", text=textwrap.dedent(code).lstrip("\n"))
    found: dict[tuple[int, int], bool] = {}

    def visit(node, ctx):
        if isinstance(node.func, ast.Attribute) and node.func.attr == "sum" and not node.args:
            found[(node.lineno, node.col_offset)] = ctx.reaches_host(node)

    analysis = FileAnalysis(source.parse(), {ast.Call: [visit]}, {visit: False})
    RuleContext(source, analysis)
    analysis.run()
    return [found[k] for k in sorted(found)]


HOST = [
    ("if m.sum():\n    pass", "if"),
    ("while m.sum():\n    pass", "while"),
    ("assert m.sum()", "assert"),
    ("a = 1 if m.sum() else 2", "ternary"),
    ("a = not m.sum()", "not"),
    ("a = m.sum() and b", "and"),
    ("n = int(m.sum())", "int"),
    ("n = float(m.sum() / 2)", "float of arithmetic"),
    ("for i in range(m.sum()):\n    pass", "range"),
    ("s = f'{m.sum()}'", "f-string"),
    ("s = '%d' % m.sum()", "% formatting"),
    ("print(m.sum())", "print"),
    ("v = m.sum().tolist()", "tolist"),
    ("v = m.sum().item()", "item"),
    ("v = names[m.sum()]", "a Python list index"),
    ("log(m.sum())", "a non-torch call"),
    ("n = m.sum()\nif n > 0:\n    pass", "a comparison used as a condition, one assignment later"),
    ("n = m.sum()\nk = n + 1\nprint(k)", "through two assignments"),
    ("seen = []\nseen.append(m.sum())\nprint(seen)", "a list that is printed"),
    ("a, b = m.sum(), 0\nif a:\n    pass", "tuple assignment"),
    ("writer.add_scalar('n', m.sum())", "a logger"),
    ("ok = (m.sum() == 3)\nif not ok:\n    pass", "`if not` on a stored comparison"),
    ("w = torch.ones(m.sum())", "a size argument"),
    ("k = torch.tensor([m.sum(), 1])", "torch.tensor of a list holding it"),
    ("v = x.view(m.sum(), -1)", "a size in a tuple of a method"),
    ("v = torch.zeros((m.sum(), 3))", "a size in a tuple literal"),
]

DEVICE = [
    ("correct += m.sum()", "an accumulator read after the loop"),
    ("n = m.sum()\nloss = (x * n).mean()", "arithmetic on the device"),
    ("n = torch.clamp(m.sum(), min=1)", "a torch function"),
    ("seen.append(m.sum())", "a list never read in the loop"),
    ("shape = m.sum().shape", "metadata only"),
    ("out = x[m.sum()]", "indexing a tensor"),
    ("n = m.sum()\nk = (n, 2)", "a tuple nobody reads"),
    ("k = torch.tensor(m.sum())", "torch.tensor of a tensor: a copy on its device"),
]


def _loop(body: str) -> str:
    return ("import torch\n\ndef step(x: torch.Tensor, m: torch.Tensor):\n    for _ in range(3):\n"
            + textwrap.indent(body, " " * 8) + "\n    print(correct, seen)\n")


@pytest.mark.parametrize("body", [b for b, _ in HOST], ids=[n for _, n in HOST])
def test_host_consumers_are_seen(body):
    assert reaches(_loop(body)) == [True]


@pytest.mark.parametrize("body", [b for b, _ in DEVICE], ids=[n for _, n in DEVICE])
def test_device_uses_are_not_host_reads(body):
    assert reaches(_loop(body)) == [False]


def test_a_read_after_the_loop_runs_once_and_does_not_count():
    code = """
    import torch

    def epoch(loader, model):
        correct = 0
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum()
        print(int(correct))
    """
    assert reaches(code) == [False]


def test_returns_are_followed_to_the_files_calls():
    code = """
    import torch

    def count(m: torch.Tensor):
        return m.sum()

    def hits(m: torch.Tensor):
        return m.sum()

    for x in loader:
        if count(x > 0):
            pass
        total = hits(x > 0) + 1
    """
    assert reaches(code) == [True, False]


def test_arguments_are_followed_into_the_files_functions():
    code = """
    import torch

    def show(n):
        print(n)

    def keep(n):
        return n * 2

    for x in loader:
        show((x > 0).sum())
        y = keep((x > 0).sum())
    """
    assert reaches(code) == [True, False]


def test_equal_stored_then_negated_is_a_condition():
    code = """
    import torch

    def kernel(x1: torch.Tensor, x2: torch.Tensor):
        x1_eq_x2 = (x1 == x2).sum()
        if not x1_eq_x2:
            return x1
        return x2
    """
    assert reaches(code) == [True]

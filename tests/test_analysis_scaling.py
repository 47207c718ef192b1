"""The analyzer's speed-ups are exact (same facts as the straightforward versions), and large
or deeply nested files are analyzed, or reported as PFL001, never a crash."""

from __future__ import annotations

import ast
import random
import textwrap
from pathlib import Path

import pytest

from perflint.api import check_paths, check_source
from perflint.config import SettingsResolver
from perflint.facts import analysis
from perflint.facts.analysis import FileAnalysis, _join_env, _Walker
from perflint.facts.context import RuleContext
from perflint.facts.values import BATCH, NONE, PYTHON, TENSOR, UNKNOWN, Kind, Value, join
from perflint.source import SourceFile

CORPUS = Path("/tmp/corpora/torchvision")

SNIPPETS = [
    """
    def f(xs, loader):
        total = sum(g(v, key=[w for w in v]) for v in xs)
        return total
    """,
    """
    def f(x):
        y = lambda a=[i for i in x]: a
        return y
    """,
    """
    def f(x):
        h = lambda: [i for i in x]
        @deco([i for i in x])
        def inner():
            return {k: v for k, v in x}
        class C(Base[[i for i in x]]):
            attr: list[int] = [i for i in range(3)]
            while True:
                break
        with ctx([i for i in x]) as c:
            pass
        try:
            pass
        except E if [i for i in x] else F:
            pass
        match x:
            case [a, *rest] if (i for i in rest):
                pass
        return f"{[i for i in x]!r:>{(j for j in x)}}"
    """,
    """
    import torch.nn as nn
    if cond:
        def f(): return 1
        def f(): return [i for i in range(2)]
    else:
        def f(): pass
    class A:
        def m(self): yield from (i for i in self)
        def m(self): return 0
    """,
]


def _reference_collect(tree: ast.Module) -> list:
    """The collector before it skipped expressions: every node, via ast.iter_child_nodes."""
    facts = []
    has_loop: dict[int, bool] = {}
    stack = [(stmt, None) for stmt in reversed(tree.body)]
    while stack:
        node, owner = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            facts.append(node)
            has_loop.setdefault(id(node), False)
            stack.extend((child, node) for child in reversed(node.body))
            continue
        if isinstance(node, ast.ClassDef):
            stack.extend((child, owner) for child in reversed(node.body))
            continue
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp,
                             ast.DictComp, ast.GeneratorExp)):
            has_loop[id(owner) if owner else 0] = True
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.stmt, ast.expr, ast.excepthandler, ast.match_case, ast.comprehension)):
                stack.append((child, owner))
    return [(f.name, f.lineno, has_loop.get(id(f), False)) for f in facts] + [("<module>", 0, has_loop.get(0, False))]


def _collected(tree: ast.Module) -> list:
    fa = FileAnalysis(tree)
    return [(f.name, f.node.lineno, f.has_loop) for f in fa.functions] + [("<module>", 0, fa.module.has_loop)]


def _trees():
    for snippet in SNIPPETS:
        yield ast.parse(textwrap.dedent(snippet))
    if CORPUS.is_dir():
        for path in sorted(CORPUS.rglob("*.py"))[::4]:
            yield ast.parse(path.read_bytes())


def test_collector_finds_the_same_functions_and_loops_as_a_full_walk():
    checked = 0
    for tree in _trees():
        assert _collected(tree) == _reference_collect(tree)
        checked += 1
    assert checked >= len(SNIPPETS)


def test_comprehension_edges_match_iter_child_nodes():
    """Which comprehensions make a function "have a loop" is unchanged: keyword values and
    lambda defaults were never looked at; positional arguments and lambda bodies were."""
    def has_loop(source: str) -> bool:
        return FileAnalysis(ast.parse(source)).functions[0].has_loop

    assert has_loop("def g(v):\n    return h([w for w in v])\n")
    assert has_loop("def g(v):\n    return lambda: [w for w in v]\n")
    assert not has_loop("def g(v):\n    return h(key=[w for w in v])\n")
    assert not has_loop("def g(v):\n    return lambda a=[w for w in v]: a\n")
    assert not has_loop("def g(v):\n    return h(v)\n")


# --------------------------------------------------------------------------- BinOp chains
def _recursive_ev_binop(self, node):
    left = self.ev(node.left)
    right = self.ev(node.right)
    return self.binop(left, node.op, right, node.left, node.right)


def _values_seen(source: str) -> list:
    """Every expression's value as rules see it, in dispatch order."""
    seen = []

    def record(node, ctx):
        seen.append((type(node).__name__, node.lineno, node.col_offset, ctx.value(node), ctx.hot))

    dispatch = {t: [record] for t in (ast.BinOp, ast.Name, ast.Call, ast.Constant, ast.Attribute)}
    tree = ast.parse(source)
    fa = FileAnalysis(tree, dispatch, {record: False})
    RuleContext(SourceFile("x.py", source), fa)
    fa.run()
    return seen


BINOP_SOURCE = textwrap.dedent("""
    import torch
    import numpy as np

    def step(model, loader, n: int):
        for x, y in loader:
            out = model(x)
            a = out + 1 - y * 2 / n + out.sum() % 3 + np.ones(3) + "s" % n
            b = 1 + 2 + n + 4.0 + (out.mean() + (x - y) + y) @ x + a
            c = "a" + "b" + str(n) + f"{n}"
            d = [x] + [y] + [] + list(x)
            e = (x > 0) & (y > 0) | (out < 1) ^ (x == y)
""")


def test_iterative_binop_chain_gives_the_same_values_and_order(monkeypatch):
    fast = _values_seen(BINOP_SOURCE)
    monkeypatch.setattr(_Walker, "ev_BinOp", _recursive_ev_binop)
    monkeypatch.setitem(analysis._EXPR_HANDLERS, ast.BinOp, _recursive_ev_binop)
    slow = _values_seen(BINOP_SOURCE)
    assert fast == slow
    assert sum(1 for s in fast if s[0] == "BinOp") >= 20


# --------------------------------------------------------------------------- environments
def _reference_join_env(a, b):
    if a is b:
        return a
    out = dict(a)
    for key, value in b.items():
        old = out.get(key)
        out[key] = value if old is None else join(old, value)
    return out


def test_join_env_matches_the_plain_loop():
    pool = [TENSOR, PYTHON, NONE, UNKNOWN, BATCH, Value(Kind.TENSOR, dtype="bool"), Value(Kind.SEQ, elem=TENSOR)]
    rng = random.Random(7)
    for _ in range(300):
        before = {f"v{i}": rng.choice(pool) for i in range(rng.randrange(0, 30))}
        branches = []
        for _ in range(2):
            env = dict(before)
            for _ in range(rng.randrange(0, 6)):
                key = f"v{rng.randrange(0, 40)}"
                if rng.random() < 0.2:
                    env.pop(key, None)
                else:
                    env[key] = rng.choice(pool)
            branches.append(env)
        got = _join_env(*branches)
        want = _reference_join_env(*branches)
        assert got == want and list(got) == list(want)


# --------------------------------------------------------------------------- big and deep files
def test_a_long_sum_is_analyzed_not_reported_as_too_deep():
    terms = " + ".join(["x"] * 20000)
    source = f"import torch\ndef f(x, loader):\n    for b in loader:\n        y = {terms}\n        z = y.item()\n"
    found = check_source(source, "gen.py")
    assert [(d.code, d.location.row) for d in found] == [("PFL201", 5)]


@pytest.mark.parametrize("source, reason", [
    ("import torch\nx = y" + ".a" * 30000 + ".item()\n", "nesting too deep"),
    ("import torch\nx = " + "(" * 300 + "1" + ")" * 300 + "\n", "too many nested parentheses"),
    ("import torch\ndef f(x):\n" + "".join("    " * (d + 1) + f"if x > {d}:\n" for d in range(120))
     + "    " * 121 + "y = x.item()\n", "too many levels of indentation"),
])
def test_pathologically_deep_files_are_one_pfl001_and_the_run_goes_on(tmp_path, monkeypatch, source, reason):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "deep.py").write_text(source)
    (tmp_path / "train.py").write_text("import torch\nfor x in loader:\n    v = model(x).item()\n")
    report = check_paths([tmp_path], SettingsResolver(tmp_path), jobs=1)
    deep = [d for d in report.diagnostics if d.path == "deep.py"]
    assert [d.code for d in deep] == ["PFL001"] and reason in deep[0].message, deep
    assert [d.code for d in report.diagnostics if d.path == "train.py"] == ["PFL201"]


def test_long_elif_chains_and_many_branches_are_analyzed():
    branches = "".join(f"        elif x == {i}:\n            y{i} = x.item()\n" for i in range(1, 400))
    source = ("import torch\ndef f(x, loader):\n    for b in loader:\n        if x == 0:\n            y = 0\n"
              + branches)
    found = check_source(source, "gen.py")
    assert sum(d.code == "PFL201" for d in found) == 399

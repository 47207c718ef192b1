"""Fixes keep lines within the file's line length (issue 15 item 11): an inserted expression
that would make its line too long is laid out over several lines, black-style, and the
result compiles to the same code as the one-line form."""

from __future__ import annotations

import ast
import json
import textwrap

import pytest
from click.testing import CliRunner

from perflint.api import fix_source
from perflint.cli import main
from perflint.registry import all_rules
from perflint.wrap import layout, line_length_for

BINCOUNT = textwrap.dedent("""\
    import torch

    for x, y in loader:
        y = y % 10
        c = torch.bincount(y, minlength=10)
    """)
BINCOUNT_WRAPPED = textwrap.dedent("""\
    import torch

    for x, y in loader:
        y = y % 10
        c = torch.zeros(10, dtype=torch.long, device=y.device).scatter_add_(
            0, y.long(), torch.ones_like(y, dtype=torch.long)
        )
    """)


def _fix(source: str, line_length: int | None = None, **kw) -> str:
    return fix_source(source, "train.py", unsafe=True, select=["PFL217"], line_length=line_length, **kw).text


def _same_code(a: str, b: str) -> bool:
    return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))


def test_a_long_fixed_line_is_laid_out_within_88_columns():
    one_line = _fix(BINCOUNT, line_length=0)  # 0: no layout
    assert max(len(line) for line in one_line.splitlines()) > 100
    fixed = _fix(BINCOUNT)
    assert fixed == BINCOUNT_WRAPPED
    assert max(len(line) for line in fixed.splitlines()) <= 88
    assert _same_code(fixed, one_line)


@pytest.mark.torch
def test_the_laid_out_fix_computes_the_same_counts():
    import torch

    for seed in range(3):
        torch.manual_seed(seed)
        labels = torch.randint(0, 10, (200,))
        results = []
        for source in (BINCOUNT, _fix(BINCOUNT)):
            scope = {"loader": [(None, labels)]}
            exec(compile(source, "train.py", "exec"), scope)
            results.append(scope["c"])
        assert torch.equal(results[0], results[1]) and results[0].dtype == results[1].dtype


def test_the_line_length_comes_from_ruff_then_black_else_88(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 60\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "pyproject.toml").write_text("[tool.ruff]\nline-length = 120\n[tool.black]\nline-length = 70\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "pyproject.toml").write_text("[tool.ruff]\nselect = ['E']\n[tool.black]\nline-length = 70\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "ruff.toml").write_text("line-length = 100\n")
    (tmp_path / "c" / "pyproject.toml").write_text("[tool.ruff]\nline-length = 50\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "pyproject.toml").write_text("[project]\nname = 'd'\n")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "pyproject.toml").write_text("[tool.ruff\n")  # broken: not a configuration
    assert line_length_for(tmp_path / "x.py") == 60
    assert line_length_for(tmp_path / "a" / "x.py") == 120
    (tmp_path / "a" / "inner").mkdir()
    (tmp_path / "a" / "inner" / "pyproject.toml").write_text("[tool.black]\nline-length = 72\n")
    assert line_length_for(tmp_path / "a" / "inner" / "x.py") == 72, "the nearest setting wins"
    assert line_length_for(tmp_path / "b" / "x.py") == 70, "ruff's table without line-length: black's"
    assert line_length_for(tmp_path / "c" / "x.py") == 100, "ruff.toml comes first, as in ruff"
    assert line_length_for(tmp_path / "d" / "x.py") == 60, "no ruff or black table here: the one above"
    assert line_length_for(tmp_path / "e" / "x.py") == 60
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "pyproject.toml").write_text("[tool.ruff]\n")
    assert line_length_for(tmp_path / "f" / "x.py") == 88, "ruff's default"


def test_perflint_fix_uses_the_configured_line_length(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 130\n")
    (tmp_path / "wide.py").write_text(BINCOUNT)
    (tmp_path / "narrow").mkdir()
    (tmp_path / "narrow" / "pyproject.toml").write_text("[tool.black]\nline-length = 60\n")
    (tmp_path / "narrow" / "n.py").write_text(BINCOUNT)
    result = CliRunner().invoke(main, ["fix", "--no-cache", "-j", "1", "--unsafe-fixes", "--select", "PFL217",
                                       "wide.py", "narrow/n.py"])
    assert result.exit_code == 0, result.output
    wide = (tmp_path / "wide.py").read_text()
    assert wide == _fix(BINCOUNT, line_length=0), "122 columns fit in 130: one line"
    narrow = (tmp_path / "narrow" / "n.py").read_text()
    assert max(len(line) for line in narrow.splitlines()) <= 60
    assert _same_code(narrow, wide)


def test_a_trailing_comment_stays_on_the_finding_line():
    source = BINCOUNT.replace("minlength=10)", "minlength=10)  # noqa: PFL201")
    fixed = _fix(source)
    assert "scatter_add_(0, y.long(), torch.ones_like(y, dtype=torch.long))  # noqa: PFL201" in fixed


def test_line_endings_and_tab_indentation_are_kept():
    crlf = BINCOUNT.replace("\n", "\r\n")
    fixed = _fix(crlf)
    assert fixed == BINCOUNT_WRAPPED.replace("\n", "\r\n")
    tabs = BINCOUNT.replace("    y =", "\ty =").replace("    c =", "\tc =")
    fixed = _fix(tabs)
    assert "\tc = torch.zeros(10, dtype=torch.long, device=y.device).scatter_add_(\n\t\t0," in fixed
    assert fixed.endswith("\n\t)\n")


def test_a_notebook_cell_gets_the_laid_out_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": BINCOUNT.splitlines(keepends=True)}
    notebook = {"cells": [cell], "metadata": {"language_info": {"name": "python"}}, "nbformat": 4,
                "nbformat_minor": 5}
    (tmp_path / "nb.ipynb").write_text(json.dumps(notebook, indent=1) + "\n")
    result = CliRunner().invoke(main, ["fix", "--no-cache", "-j", "1", "--unsafe-fixes", "--select", "PFL217",
                                       "nb.ipynb"])
    assert result.exit_code == 0, result.output
    fixed = json.loads((tmp_path / "nb.ipynb").read_text())
    assert "".join(fixed["cells"][0]["source"]) == BINCOUNT_WRAPPED


def _examples():
    for rule in all_rules():
        for index, case in enumerate(rule.invalid):
            if case.fixed is not None:
                yield pytest.param(rule, case, id=f"{rule.code}-{index}")


@pytest.mark.parametrize("limit", [30, 50])
def test_every_rule_fix_laid_out_narrow_compiles_to_the_same_code(limit):
    """Every rule's fixes, with a line length that makes most of them wrap: the file still
    compiles to the same tree as with one-line fixes, and no line grew past the limit that
    one line did not already pass."""
    wrapped_any = 0
    for param in _examples():
        rule, case = param.values
        source = case.source()
        one_line = fix_source(source, "example.py", unsafe=True, select=[rule.code], line_length=0).text
        narrow = fix_source(source, "example.py", unsafe=True, select=[rule.code], line_length=limit).text
        assert _same_code(narrow, one_line), (rule.code, narrow)
        compile(narrow, "example.py", "exec")
        wrapped_any += narrow != one_line
        longest_before = max(len(line) for line in one_line.splitlines())
        assert max(len(line) for line in narrow.splitlines()) <= longest_before
    assert wrapped_any >= 10


@pytest.mark.parametrize("expression", [
    "f(aaaaaaaaaa, bbbbbbbbbbbb, cccccccccccc, dddddddddddd, eeeeeeeeeeee, ffffffffffff)",
    "x.very_long_method_name(argument_one=1, argument_two=[1, 2, 3], **keyword_arguments)[0]",
    "aaaaaaaaaaaaaaaa + bbbbbbbbbbbbbbbbbbbbb * ccccccccccccccccccc - dddddddddddddddddd / eeeee",
    "not torch.isfinite(loss_value_for_this_step).all_values_are_true(dimension=None, keep=False)",
    "{'first_key': first_value_expression, 'second': [1, 2, 3], **more_items_from_elsewhere}",
    "sum(value * weight for value, weight in zip(all_the_values_here, all_the_weights_there))",
    "first_condition_value if some_very_long_condition(argument) else second_value_expression",
    "(lambda t: t.reshape(-1, 4).permute(1, 0).contiguous())(tensor_argument_expression[0:100])",
    "x[aaaaaaaaaaaaaaaaaaaa:bbbbbbbbbbbbbbbbbbbbbbbbb, cccccccccccccccccccccccccc::ddddddddddddd]",
])
def test_layout_keeps_the_expression(expression):
    for limit in (20, 40, 60):
        laid_out = layout(expression, 8, "    ", limit)
        assert laid_out is not None
        assert ast.dump(ast.parse(laid_out, mode="eval")) == ast.dump(ast.parse(expression, mode="eval")), laid_out
        assert max(len(line) for line in ("        " + laid_out).splitlines()) <= max(limit, len(expression) + 8)

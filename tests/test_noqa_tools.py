"""Suppressions: where a noqa belongs, `--add-noqa` baselines, and PFL002 unused-noqa."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from perflint.api import check_paths, check_source, fix_source
from perflint.config import Settings, SettingsResolver
from perflint.engine import Linter
from perflint.noqa import parse_suppressions
from perflint.baseline import add_noqa_to_paths
from perflint.noqa_tools import noqa_rows, plan_add_noqa, remove_codes_edit
from perflint.fixes import apply_edits
from perflint.registry import all_rules
from perflint.rule import RawFinding, Rule, SuppressionReport
from perflint.source import SourceFile

LOOP = "import torch\nfor x, y in loader:\n    loss = model(x)\n"


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# --------------------------------------------------------------------------- noqa rows
def test_noqa_rows_for_multiline_strings_and_continuations():
    text = src('''
        a = 1
        b = f"""x
        {y.item()}
        z""" + \\
            c
        d = 2
    ''')
    assert noqa_rows(text) == {2: 5, 3: 5, 4: 5}
    assert noqa_rows("a = 1\nb = (c,\n     d)\n") == {}, "brackets end lines where comments may go"


def test_finding_inside_a_multiline_string_is_suppressed_after_the_string():
    body = src('''
        import torch
        for x, y in loader:
            loss = model(x)
            print(f"""{
                loss.item()} is the loss
            """)  # noqa: PFL201
    ''')
    assert check_source(body, "a.py", select=["PFL201"]) == []
    unsuppressed = body.replace("  # noqa: PFL201", "")
    (d,) = check_source(unsuppressed, "a.py", select=["PFL201"])
    assert d.location.row == 5 and d.noqa_row == 6


def test_backslash_continued_findings_are_suppressed_on_the_last_line():
    body = LOOP + "    v = loss.item() + \\\n        1\n"
    (d,) = check_source(body, "a.py", select=["PFL201"])
    assert (d.location.row, d.noqa_row) == (4, 5)
    assert check_source(body.replace("        1\n", "        1  # noqa: PFL201\n"), "a.py", select=["PFL201"]) == []


# --------------------------------------------------------------------------- --add-noqa
def _baseline(text: str) -> str:
    settings = Settings(root=Path.cwd())
    source = SourceFile(path="a.py", text=text)
    result = Linter(settings.rules).lint_source(source)
    rows: dict[int, set[str]] = {}
    for d in result.diagnostics:
        rows.setdefault(d.noqa_row, set()).add(d.code)
    new = apply_edits(text, plan_add_noqa(text, rows).edits)
    ast.parse(new)  # never breaks code
    return new


def test_add_noqa_merges_and_appends():
    text = LOOP + "\n".join("    " + line if line else line for line in src('''
        a = loss.item()
        b = loss.item()  # log it
        c = loss.item()  # noqa: E501
        d = loss.item()  # noqa: PFL201
        if (loss > 0).any() and x.nonzero().numel():
            pass
    ''').split("\n"))
    new = _baseline(text)
    lines = new.splitlines()
    assert lines[3] == "    a = loss.item()  # noqa: PFL201"
    assert lines[4] == "    b = loss.item()  # log it  # noqa: PFL201"
    assert lines[5] == "    c = loss.item()  # noqa: E501, PFL201"
    assert lines[6] == "    d = loss.item()  # noqa: PFL201"
    assert lines[7].endswith("numel():  # noqa: PFL206, PFL211")
    assert check_source(new, "a.py") == []


def test_add_noqa_puts_comments_after_strings_and_continuations():
    text = LOOP + src('''
            print(f"""{
        loss.item()} is
        the loss""")
            v = loss.item() + \\
                1
    ''')
    new = _baseline(text)
    assert 'the loss""")  # noqa: PFL201' in new
    assert "loss.item()} is\n" in new, "nothing added inside the string"
    assert "+ \\\n        1  # noqa: PFL201" in new
    assert check_source(new, "a.py") == []


def test_add_noqa_keeps_bare_noqa_and_skips_rows_it_cannot_write():
    plan = plan_add_noqa("x = 1  # noqa\n", {1: {"PFL201"}})
    assert plan.edits == [] and plan.added == 0
    plan = plan_add_noqa('x = """a\nb"""\n', {1: {"PFL201"}})
    assert plan.edits == [] and plan.skipped and "string" in plan.skipped[0][1]


def test_add_noqa_command_on_files_and_notebooks(tmp_path, monkeypatch):
    import shutil

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(LOOP + "    v = loss.item()\n    w = 1  # noqa: PFL999\n")
    shutil.copy(Path(__file__).parent / "fixtures" / "notebooks" / "train.ipynb", tmp_path / "nb.ipynb")
    (tmp_path / "bad.py").write_text("def f(:\n")
    result = add_noqa_to_paths([tmp_path], SettingsResolver(tmp_path))
    assert result.added == 1 + 4 and result.files == 2
    text = (tmp_path / "train.py").read_text()
    assert "    v = loss.item()  # noqa: PFL201\n" in text
    assert "# noqa: PFL999" in text, "PFL002 findings are not baselined"
    left = {d.code for d in check_paths([tmp_path], SettingsResolver(tmp_path)).diagnostics}
    assert left == {"PFL001", "PFL002"}
    assert (tmp_path / "bad.py").read_text() == "def f(:\n"


# --------------------------------------------------------------------------- PFL002
def codes(text: str, select=("PFL002", "PFL201")) -> list[tuple[str, int, str]]:
    return [(d.code, d.location.row, d.message) for d in check_source(text, "a.py", select=list(select))]


def test_unused_codes_of_enabled_rules_are_reported():
    text = LOOP + "    v = loss.item()  # noqa: PFL201\n    w = 1  # noqa: PFL201\n"
    assert codes(text) == [("PFL002", 5, "unused `noqa` code (unused: `PFL201`)")]


def test_only_our_codes_and_only_enabled_rules():
    text = LOOP + "    w = 1  # noqa: E501, PFL206\n    z = 2  # noqa\n"
    assert codes(text) == [], "PFL206 is not enabled; E501 and bare noqa are not ours"
    assert codes(text, select=("PFL002", "PFL206")) == [("PFL002", 4, "unused `noqa` code (unused: `PFL206`)")]


def test_file_level_exemptions_and_opt_outs():
    text = "# perflint: noqa: PFL201\n" + LOOP + "    w = 1  # noqa: PFL201\n"
    assert codes(text) == []
    assert codes("x = 1  # noqa: PFL201, PFL002\n") == []


def test_unused_noqa_runs_without_torch_in_the_file():
    assert codes("x = 1  # noqa: PFL201\n") == [("PFL002", 1, "unused `noqa` code (unused: `PFL201`)")]


@pytest.mark.parametrize("before,after", [
    ("x = 1  # noqa: PFL201\n", "x = 1\n"),
    ("x = 1  # noqa: PFL201, E501\n", "x = 1  # noqa: E501\n"),
    ("x = 1  # noqa: E501,PFL201\n", "x = 1  # noqa: E501\n"),
    ("x = 1  # type: ignore  # noqa: PFL201\n", "x = 1  # type: ignore\n"),
    ("x = 1  # noqa: PFL201 -- kept for the baseline\n", "x = 1  # -- kept for the baseline\n"),
    ("y = 0\n    # noqa: PFL201\nx = 1\n".replace("    ", ""), "y = 0\nx = 1\n"),
    ("x = '# noqa: PFL201'  # noqa: PFL201\n", "x = '# noqa: PFL201'\n"),
])
def test_the_fix_removes_only_what_is_unused(before, after):
    outcome = fix_source(before, "a.py", select=["PFL002", "PFL201"])
    assert outcome.text == after
    assert [d.code for d in outcome.fixed] == ["PFL002"]


def test_unknown_codes_need_unsafe_fixes():
    text = "x = 1  # noqa: PFL999\n"
    (d,) = check_source(text, "a.py", select=["PFL002"])
    assert d.message == "unused `noqa` code (unknown: `PFL999`)" and d.fix.applicability.value == "unsafe"
    assert fix_source(text, "a.py", select=["PFL002"]).text == text
    assert fix_source(text, "a.py", select=["PFL002"], unsafe=True).text == "x = 1\n"


def test_remove_codes_edit_keeps_order_of_the_rest():
    text = "x = 1  # noqa: B950, PFL201, A001\n"
    comment = parse_suppressions(text).lines[1]
    start, end, new = remove_codes_edit(text, comment, ["PFL201"])
    assert text[:start] + new + text[end:] == "x = 1  # noqa: B950, A001\n"


# --------------------------------------------------------------------------- engine hook
class _CountComments(Rule):
    """Test-only: proves the after-suppression hook is generic (not PFL002-specific)."""

    code = "PFL991"
    name = "test-count-noqa"
    message = "{n} noqa comments, {used} used"
    family = "meta"
    hot_only = False
    triggers = (b"noqa",)

    def after_suppressions(self, report: SuppressionReport) -> list[RawFinding]:
        used = sum(1 for c in report.suppressions.lines.values() if c.used)
        assert "PFL201" in report.enabled_codes and "PFL002" in report.known_codes
        return [RawFinding(self.code, self.message.format(n=len(report.suppressions.lines), used=used), row=1, column=0)]


def test_after_suppression_hook_sees_what_was_suppressed():
    rules = [r for r in all_rules() if r.code == "PFL201"] + [_CountComments]
    text = LOOP + "    v = loss.item()  # noqa: PFL201\n    w = 1  # noqa: PFL201\n"
    result = Linter(rules).lint_source(SourceFile(path="a.py", text=text))
    assert [(d.code, d.message) for d in result.diagnostics] == [("PFL991", "2 noqa comments, 1 used")]
    assert Linter(rules).lint_source(SourceFile(path="a.py", text="x = 1\n")).diagnostics == []


def test_the_cheap_noqa_row_gate_agrees_with_tokenizing():
    from perflint.noqa_tools import NoqaRowMap

    text = src('''
        # a comment with """ in it
        x = 1
        doc = """
        text \\
        more"""
        y = f(a, \\
              b) + g("""
        z""")
        w = '\'\'\' not a string start'
        v = 2
    ''')
    exact = noqa_rows(text)
    gated = NoqaRowMap(text)
    assert exact, "the sample has joined rows"
    for row in range(1, text.count("\\n") + 2):
        assert gated(row) == exact.get(row, row), row
    for path in (Path(__file__).parent / "fixtures" / "report").glob("*.py"):
        body = path.read_text(encoding="utf-8")
        assert all(NoqaRowMap(body)(r) == noqa_rows(body).get(r, r) for r in range(1, body.count("\\n") + 2))

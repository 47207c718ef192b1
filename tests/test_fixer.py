"""The fixer, end to end: the CLI contract (`fix`, `check --fix`, `--diff`, `--show-fixes`,
`--unsafe-fixes`, `--exit-non-zero-on-fix`, exit codes, the summary, JSON fixes), broken fixes
dropped without losing the others, imports, idempotence, and never losing user code
(comments, encodings, BOM, line endings, file mode, symlinks, atomic writes, files changed on
disk while being fixed)."""

from __future__ import annotations

import json
import os
import stat
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import perflint_rules
from perflint import api, engine
from perflint.cli import main
from perflint.registry import all_rules
from perflint.rule import Rule
from perflint.types import Applicability

# One safe fix (PFL101 on `zeros`), one unsafe fix (PFL101 on `randn`), one finding
# without a fix (PFL201).
SOURCE = textwrap.dedent(
    """\
    import torch

    for x, y in loader:
        a = torch.zeros(3).to(device)  # keep me
        b = torch.randn(3).to(device)
        loss = criterion(model(x), y)
        total = loss.item()
    """
)
SAFE_FIXED = SOURCE.replace("torch.zeros(3).to(device)", "torch.zeros(3, device=device)")
ALL_FIXED = SAFE_FIXED.replace("torch.randn(3).to(device)", "torch.randn(3, device=device)")
SELECT = ["--select", "PFL101,PFL201"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str, input: bytes | None = None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


# --------------------------------------------------------------------------- CLI contract
def test_diff_prints_a_unified_diff_writes_nothing_and_exits_1(project):
    target = write(project / "train.py", SOURCE)
    result = run("fix", "--diff", *SELECT, "train.py")
    assert result.exit_code == 1
    assert result.stdout.startswith("--- train.py\n+++ train.py\n@@ ")
    assert "-    a = torch.zeros(3).to(device)  # keep me\n" in result.stdout
    assert "+    a = torch.zeros(3, device=device)  # keep me\n" in result.stdout
    assert "randn(3, device" not in result.stdout, "unsafe fixes need --unsafe-fixes"
    assert target.read_text() == SOURCE
    assert "Would fix 1 finding." in result.stderr


def test_diff_without_changes_exits_0(project):
    write(project / "clean.py", "import torch\nx = torch.zeros(3)\n")
    result = run("check", "--diff", *SELECT, "clean.py")
    assert result.exit_code == 0 and result.stdout == ""


def test_check_fix_is_fix(project):
    one, two = write(project / "one.py", SOURCE), write(project / "two.py", SOURCE)
    fixed_by_fix = run("fix", *SELECT, "one.py")
    fixed_by_check = run("check", "--fix", *SELECT, "two.py")
    assert one.read_text() == two.read_text() == SAFE_FIXED
    assert fixed_by_fix.exit_code == fixed_by_check.exit_code == 1  # PFL201 and the unsafe fix remain
    assert fixed_by_fix.stdout.replace("one.py", "F") == fixed_by_check.stdout.replace("two.py", "F")


def test_summary_counts_fixed_and_says_how_many_more_unsafe_fixes_exist(project):
    write(project / "train.py", SOURCE)
    check = run("check", *SELECT, "train.py")
    assert "[*] 1 fixable with `perflint fix` (1 more fix available with `--unsafe-fixes`)." in check.stdout
    fixed = run("fix", *SELECT, "train.py")
    assert "Found 3 findings (1 fixed, 2 remaining)." in fixed.stdout
    assert "1 more fix available with `--unsafe-fixes`." in fixed.stdout
    unsafe = run("fix", "--unsafe-fixes", *SELECT, "train.py")
    assert "(1 fixed, 1 remaining)" in unsafe.stdout and "--unsafe-fixes`" not in unsafe.stdout


def test_show_fixes_lists_what_was_fixed(project):
    write(project / "train.py", SOURCE)
    result = run("fix", "--show-fixes", "--unsafe-fixes", *SELECT, "train.py")
    assert "Fixed 2 findings:\n- train.py:\n    2 × PFL101 (create-then-move)\n" in result.stdout


def test_exit_codes(project):
    write(project / "train.py", SOURCE)
    # findings remain (PFL201): 1
    assert run("fix", "--unsafe-fixes", *SELECT, "train.py").exit_code == 1
    write(project / "train.py", SOURCE)
    # everything selected gets fixed: 0 ...
    assert run("fix", "--unsafe-fixes", "--select", "PFL101", "train.py").exit_code == 0
    # ... unless --exit-non-zero-on-fix, and only when something was fixed
    write(project / "train.py", SOURCE)
    assert run("fix", "--unsafe-fixes", "--exit-non-zero-on-fix", "--select", "PFL101", "train.py").exit_code == 1
    assert run("fix", "--unsafe-fixes", "--exit-non-zero-on-fix", "--select", "PFL101", "train.py").exit_code == 0
    assert (project / "train.py").read_text() == ALL_FIXED


def test_json_output_carries_each_fix(project):
    write(project / "train.py", SOURCE)
    result = run("check", "--output-format", "json", *SELECT, "train.py")
    findings = json.loads(result.stdout)
    by_line = {(f["code"], f["location"]["row"]): f for f in findings}
    safe, unsafe, none = by_line[("PFL101", 4)]["fix"], by_line[("PFL101", 5)]["fix"], by_line[("PFL201", 7)]["fix"]
    assert safe["applicability"] == "safe" and unsafe["applicability"] == "unsafe" and none is None
    assert safe["message"].startswith("Create the tensor on the device")
    assert safe["edits"] == [{
        "content": "torch.zeros(3, device=device)",
        "location": {"row": 4, "column": 9},
        "end_location": {"row": 4, "column": 34},
    }]


def test_display_only_fixes_are_listed_in_json_but_never_applied(project, monkeypatch):
    """A fix whose import libcst cannot place becomes display-only (fixes.materialize_fix)."""
    import perflint.fixes as fixes

    monkeypatch.setattr(fixes, "_import_edit", lambda text, modules: None)
    write(project / "train.py", "from torch import zeros\n\nfor x, y in loader:\n    z = zeros(3).cuda().half()\n")
    findings = json.loads(run("check", "--output-format", "json", "--select", "PFL101", "train.py").stdout)
    assert [f["fix"]["applicability"] for f in findings] == ["displayonly"]
    assert run("fix", "--unsafe-fixes", "--select", "PFL101", "train.py").exit_code == 1
    assert "zeros(3).cuda().half()" in (project / "train.py").read_text()


# --------------------------------------------------------------------------- broken fixes
class BreaksTheFile(Rule):
    """## What it does
    Test only: offers a "fix" for `print(...)` that does not compile."""

    code = "PFL998"
    name = "test-broken-fix"
    message = "a test finding with a broken fix"
    hot_only = False
    triggers = None

    def visit_Call(self, node, ctx):
        if ctx.call_name(node) == "builtins.print":
            ctx.report(node, fix=ctx.fix(Applicability.SAFE, "break it", [ctx.replace(node, "print(")]))


@pytest.fixture
def broken_rule(monkeypatch):
    monkeypatch.setattr(perflint_rules, "RULES", [*perflint_rules.RULES, BreaksTheFile])
    all_rules.cache_clear()
    engine._linters.clear()
    yield BreaksTheFile
    monkeypatch.undo()
    all_rules.cache_clear()
    engine._linters.clear()


def test_a_fix_that_breaks_the_file_is_dropped_and_the_others_are_kept(broken_rule):
    source = SOURCE.replace("    total = loss.item()\n", "    print(loss); c = torch.ones(2).to(device)\n")
    outcome = api.fix_source(source, "t.py", select=["PFL998", "PFL101"])
    assert "torch.zeros(3, device=device)" in outcome.text
    assert "torch.ones(2, device=device)" in outcome.text, "a fix on the same line as the broken one"
    assert "print(loss)" in outcome.text
    assert [(d.code, why) for d, why in outcome.dropped] == [("PFL998", "the fixed code did not compile")]
    assert [d.code for d in outcome.remaining].count("PFL998") == 1


def test_a_fix_that_only_fails_to_compile_is_dropped_too(monkeypatch):
    """`await` outside an async function parses but does not compile."""
    from perflint_rules.data.create_then_move import CreateThenMove

    original = CreateThenMove._fix

    def awaiting(self, node, move, inner, factory, casts, ctx):
        plan = original(self, node, move, inner, factory, casts, ctx)
        if plan is not None and ctx.source.line_text(node.lineno).strip().startswith("b ="):
            start, end, text = plan.edits[0]
            plan.edits[0] = (start, end, f"await {text}")
        return plan

    monkeypatch.setattr(CreateThenMove, "_fix", awaiting)
    source = SOURCE.replace("torch.randn(3)", "torch.ones(3)")
    outcome = api.fix_source(source, "t.py", select=["PFL101"])
    assert "torch.zeros(3, device=device)" in outcome.text and "torch.ones(3).to(device)" in outcome.text
    assert len(outcome.dropped) == 1


def test_the_cli_warns_about_a_dropped_fix_and_writes_the_rest(project, broken_rule):
    write(project / "t.py", SOURCE.replace("    total = loss.item()\n", "    print(loss)\n"))
    result = run("fix", "--select", "PFL998,PFL101", "t.py")
    assert "perflint: warning: t.py:7: dropped the PFL998 fix: the fixed code did not compile" in result.stderr
    text = (project / "t.py").read_text()
    assert "torch.zeros(3, device=device)" in text and "print(loss)" in text


# --------------------------------------------------------------------------- imports, idempotence
def test_needed_imports_are_added_once_after_the_existing_imports():
    source = textwrap.dedent(
        '''\
        """Docstring."""
        from __future__ import annotations

        from torch import ones, zeros

        for x, y in loader:
            a = zeros(3).cuda().half()
            b = ones(3).cuda().double()
        '''
    )
    outcome = api.fix_source(source, "t.py", select=["PFL101"])
    assert outcome.text.count("import torch\n") == 1
    head = outcome.text.split("for x")[0]
    assert head.index("from __future__") < head.index("from torch import") < head.index("import torch\n")
    assert 'zeros(3, device="cuda", dtype=torch.float16)' in outcome.text
    assert 'ones(3, device="cuda", dtype=torch.float64)' in outcome.text
    compile(outcome.text, "t.py", "exec")


def test_fixing_twice_changes_nothing(project):
    write(project / "train.py", SOURCE)
    run("fix", "--unsafe-fixes", *SELECT, "train.py")
    first = (project / "train.py").read_bytes()
    again = run("fix", "--unsafe-fixes", "--exit-non-zero-on-fix", "--select", "PFL101", "train.py")
    assert again.exit_code == 0 and (project / "train.py").read_bytes() == first


# --------------------------------------------------------------------------- never lose user code
@pytest.mark.parametrize(
    "name,raw,expected",
    [
        (
            "latin1",
            b"# -*- coding: latin-1 -*-\nimport torch\n# caf\xe9\nfor x, y in loader:\n    a = torch.zeros(3).to(device)  # \xe9t\xe9\n",
            b"# -*- coding: latin-1 -*-\nimport torch\n# caf\xe9\nfor x, y in loader:\n    a = torch.zeros(3, device=device)  # \xe9t\xe9\n",
        ),
        (
            "bom-crlf",
            b"\xef\xbb\xbfimport torch\r\n# \xc3\xa9\r\nfor x, y in loader:\r\n    a = torch.zeros(3).to(device)\r\n",
            b"\xef\xbb\xbfimport torch\r\n# \xc3\xa9\r\nfor x, y in loader:\r\n    a = torch.zeros(3, device=device)\r\n",
        ),
        (
            "cr",
            b"import torch\rfor x, y in loader:\r    a = torch.zeros(\r        3,\r    ).to(device)\r",
            b"import torch\rfor x, y in loader:\r    a = torch.zeros(\r        3,\r        device=device,\r    )\r",
        ),
        (
            "crlf-import",
            b"from torch import zeros\r\n\r\nfor x, y in loader:\r\n    a = zeros(3).cuda().half()\r\n",
            b"from torch import zeros\r\nimport torch\r\n\r\nfor x, y in loader:\r\n"
            b"    a = zeros(3, device=\"cuda\", dtype=torch.float16)\r\n",
        ),
        (
            "no-final-newline",
            b"import torch\nfor x, y in loader:\n    a = torch.zeros(3).to(device)",
            b"import torch\nfor x, y in loader:\n    a = torch.zeros(3, device=device)",
        ),
    ],
)
def test_encoding_bom_and_line_endings_are_kept(project, name, raw, expected):
    target = project / f"{name}.py"
    target.write_bytes(raw)
    run("fix", "--select", "PFL101", target.name)
    assert target.read_bytes() == expected


def test_file_mode_is_kept_and_no_temporary_file_is_left(project):
    target = write(project / "train.py", SOURCE)
    target.chmod(0o755)
    inode = target.stat().st_ino
    run("fix", *SELECT, "train.py")
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert target.stat().st_ino != inode, "written through a temporary file and a rename"
    assert sorted(p.name for p in project.iterdir()) == ["train.py"]


def test_a_symbolic_link_stays_a_link(project):
    real = write(project / "real.py", SOURCE)
    (project / "link.py").symlink_to("real.py")
    run("fix", *SELECT, "link.py")
    assert (project / "link.py").is_symlink() and os.readlink(project / "link.py") == "real.py"
    assert real.read_text() == SAFE_FIXED


def test_a_file_changed_on_disk_while_being_fixed_is_not_overwritten(project, monkeypatch):
    target = write(project / "train.py", SOURCE)
    edited = SOURCE + "# saved by an editor meanwhile\n"
    original = api.fix_file_source

    def fix_while_someone_edits(*args, **kwargs):
        outcome = original(*args, **kwargs)
        target.write_text(edited)
        return outcome

    monkeypatch.setattr(api, "fix_file_source", fix_while_someone_edits)
    result = run("fix", *SELECT, "train.py")
    assert target.read_text() == edited
    assert "changed on disk since it was read; not overwriting it" in result.stderr
    assert result.exit_code == 1
    assert sorted(p.name for p in project.iterdir()) == ["train.py"]


def test_a_failed_write_leaves_the_original_untouched(project, monkeypatch):
    import perflint.fileio as fileio

    target = write(project / "train.py", SOURCE)

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fileio.os, "replace", failing_replace)
    result = run("fix", *SELECT, "train.py")
    assert target.read_text() == SOURCE
    assert "No space left on device" in result.stderr
    assert sorted(p.name for p in project.iterdir()) == ["train.py"]


def test_comments_and_formatting_outside_the_fixed_spans_are_untouched():
    source = textwrap.dedent(
        """\
        import torch  # the import


        # a comment block
        for x, y in loader:   # odd   spacing
            a = torch.zeros(  # inside the call
                3,
            ).to(device)
            b = (torch.ones(2)
                 .to(device))  # after
            s = '''a string with torch.zeros(3).to(device) in it'''
        """
    )
    outcome = api.fix_source(source, "t.py", select=["PFL101"])
    expected = source.replace(
        "a = torch.zeros(  # inside the call\n        3,\n    ).to(device)",
        "a = torch.zeros(  # inside the call\n        3,\n        device=device,\n    )",
    ).replace("b = (torch.ones(2)\n         .to(device))", "b = (torch.ones(2, device=device))")
    assert outcome.text == expected


def test_an_added_keyword_keeps_one_argument_per_line_and_each_comment_in_place():
    source = textwrap.dedent(
        """\
        import torch
        for x, y in loader:
            a = torch.zeros(
                3,  # rows
                4,  # columns
            ).to(device)
            b = torch.zeros(3,  # only
            ).to(device)
        """
    )
    outcome = api.fix_source(source, "t.py", select=["PFL101"])
    assert outcome.text == textwrap.dedent(
        """\
        import torch
        for x, y in loader:
            a = torch.zeros(
                3,  # rows
                4,  # columns
                device=device,
            )
            b = torch.zeros(3, device=device,  # only
            )
        """
    )

"""What a new user meets with bad input (issue 15): unreadable files and directories,
missing paths, symbolic link loops, read-only directories. Each case says what happened,
names the path, and lets the run go on where it can. In-process (click's runner): no
subprocess per case.

Root ignores file modes and CI runs as root, so each permission case runs twice: with the
`deny` fixture (the operating system call fails as it does for a user), and with real
modes as any other user (`as_a_user`)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import as_a_user

from perflint.cli import main

GOOD = "import torch\n\nfor x, y in loader:\n    total += model(x).sum().item()\n"
FIXABLE = "import torch\n\nfor x, y in loader:\n    a = torch.zeros(3).to(device)\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(main, [*args], catch_exceptions=False)


# --------------------------------------------------------------------------- 1. unreadable file
def _unreadable_file_is_one_finding(project: Path) -> None:
    result = run("check", "--no-cache", "-j", "1", "locked.py", "ok.py")
    assert result.exit_code == 1, result.output
    assert "not readable" not in result.stderr and "Usage" not in result.stderr
    assert "locked.py:1:1: PFL001 cannot analyze file: cannot read file: Permission denied" in result.stdout
    assert "ok.py:4:14: PFL201" in result.stdout, "the other file is still checked"
    assert "Found 2 findings." in result.stdout


def test_an_unreadable_named_file_is_a_finding_and_the_run_goes_on(project, deny):
    (project / "locked.py").write_text(GOOD)
    (project / "ok.py").write_text(GOOD)
    deny(project / "locked.py")
    _unreadable_file_is_one_finding(project)


@as_a_user
def test_an_unreadable_named_file_is_a_finding_and_the_run_goes_on_with_real_modes(project):
    (project / "locked.py").write_text(GOOD)
    (project / "ok.py").write_text(GOOD)
    (project / "locked.py").chmod(0)
    try:
        _unreadable_file_is_one_finding(project)
    finally:
        (project / "locked.py").chmod(0o644)


# --------------------------------------------------------------------------- 2. unlistable directory
def _unlistable_directory_is_reported(project: Path) -> None:
    result = run("check", "--no-cache", "-j", "1", "tree")
    assert result.exit_code == 1, result.output
    sub = os.path.join("tree", "sub")
    assert f"{sub}:1:1: PFL001 cannot analyze directory: cannot read its files: Permission denied" in result.stdout
    assert os.path.join("tree", "ok.py") + ":4:14: PFL201" in result.stdout
    shown = run("check", "--show-files", "tree")
    assert shown.exit_code == 0
    assert shown.stdout == os.path.join("tree", "ok.py") + "\n"
    assert f"warning: {sub}: cannot read its files: Permission denied; none of them is checked" in shown.stderr


def test_an_unlistable_directory_is_reported(project, deny):
    (project / "tree" / "sub").mkdir(parents=True)
    (project / "tree" / "ok.py").write_text(GOOD)
    (project / "tree" / "sub" / "hidden.py").write_text(GOOD)
    deny(project / "tree" / "sub")
    _unlistable_directory_is_reported(project)


@as_a_user
def test_an_unlistable_directory_is_reported_with_real_modes(project):
    (project / "tree" / "sub").mkdir(parents=True)
    (project / "tree" / "ok.py").write_text(GOOD)
    (project / "tree" / "sub" / "hidden.py").write_text(GOOD)
    (project / "tree" / "sub").chmod(0)
    try:
        _unlistable_directory_is_reported(project)
    finally:
        (project / "tree" / "sub").chmod(0o755)


# --------------------------------------------------------------------------- 3. missing path
def test_a_missing_path_never_says_all_checks_passed(project):
    (project / "clean.py").write_text("x = 1\n")
    for command in (["check"], ["fix"]):
        result = run(*command, "--no-cache", "clean.py", "nope.py")
        assert result.exit_code == 2, result.output
        assert "perflint: error: nope.py: no such file or directory" in result.stderr
        assert "All checks passed" not in result.output
        assert "1 path could not be checked" in result.stdout
    result = run("check", "--no-cache", "clean.py")
    assert result.exit_code == 0 and "All checks passed!" in result.stdout


def test_a_missing_path_next_to_findings_still_says_so(project):
    (project / "ok.py").write_text(GOOD)
    result = run("check", "--no-cache", "ok.py", "nope.py")
    assert result.exit_code == 2
    assert "Found 1 finding." in result.stdout and "1 path could not be checked" in result.stdout


# --------------------------------------------------------------------------- 7. read-only directory
def _read_only_directory_is_an_error(project: Path) -> None:
    result = run("fix", "--no-cache", "-j", "1", "--select", "PFL101", "ro/a.py")
    assert result.exit_code == 2, result.output
    path = os.path.join("ro", "a.py")
    assert (f"perflint: error: cannot write {path}: its directory {project / 'ro'} is not writable "
            "(Permission denied)") in result.stderr
    assert ".perflint.tmp" not in result.output, "never the name of our temporary file"
    assert (project / "ro" / "a.py").read_text() == FIXABLE
    assert "Found 1 finding." in result.stdout, "the finding is still there"
    assert sorted(p.name for p in (project / "ro").iterdir()) == ["a.py"]


def test_a_read_only_directory_names_the_file_and_exits_2(project, monkeypatch):
    import errno
    import tempfile

    (project / "ro").mkdir()
    (project / "ro" / "a.py").write_text(FIXABLE)
    real = tempfile.mkstemp

    def mkstemp(suffix=None, prefix=None, dir=None, text=False):  # what a 0555 directory does
        if dir is not None and Path(dir).name == "ro":
            name = os.path.join(dir, f"{prefix}z73b9xt7{suffix}")
            raise PermissionError(errno.EACCES, "Permission denied", name)
        return real(suffix, prefix, dir, text)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    _read_only_directory_is_an_error(project)


@as_a_user
def test_a_read_only_directory_names_the_file_and_exits_2_with_real_modes(project):
    (project / "ro").mkdir()
    (project / "ro" / "a.py").write_text(FIXABLE)
    (project / "ro").chmod(0o555)
    try:
        _read_only_directory_is_an_error(project)
    finally:
        (project / "ro").chmod(0o755)


def test_a_file_changed_on_disk_meanwhile_is_a_warning_not_an_error(project, monkeypatch):
    """Left alone on purpose (an editor saved it): the findings remain, exit 1."""
    from perflint import api

    target = project / "a.py"
    target.write_text(FIXABLE)
    original = api.fix_file_source

    def fix_while_someone_edits(*args, **kwargs):
        outcome = original(*args, **kwargs)
        target.write_text(FIXABLE + "# saved meanwhile\n")
        return outcome

    monkeypatch.setattr(api, "fix_file_source", fix_while_someone_edits)
    result = run("fix", "--no-cache", "-j", "1", "--select", "PFL101", "a.py")
    assert result.exit_code == 1
    assert "perflint: warning: a.py changed on disk since it was read" in result.stderr


# --------------------------------------------------------------------------- 8. links
def test_a_symbolic_link_loop_is_called_a_loop(project):
    os.symlink(project / "loop_b.py", project / "loop_a.py")
    os.symlink(project / "loop_a.py", project / "loop_b.py")
    os.symlink(project / "missing.py", project / "broken.py")
    result = run("check", "--no-cache", "-j", "1", ".")
    assert result.exit_code == 1
    assert "loop_a.py:1:1: PFL001 cannot analyze file: cannot read file: symbolic link loop" in result.stdout
    assert "loop_b.py:1:1: PFL001 cannot analyze file: cannot read file: symbolic link loop" in result.stdout
    assert "broken.py:1:1: PFL001 cannot analyze file: cannot read file: broken symbolic link" in result.stdout
    named = run("check", "--no-cache", "-j", "1", "loop_a.py")
    assert "loop_a.py:1:1: PFL001 cannot analyze file: cannot read file: symbolic link loop" in named.stdout


# --------------------------------------------------------------------------- 4. config errors
def test_every_config_problem_is_reported_at_once_with_its_closest_match(project):
    (project / "ok.py").write_text(GOOD)
    (project / "pyproject.toml").write_text(
        '[tool.perflint]\nselect = ["PFL999", "PLF201"]\nselct = ["PFL2"]\nextend-select = ["tensor-itme"]\n'
        'unsafe-fixes = "yes"\n')
    result = run("check", "--no-cache", "ok.py")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == f"perflint: error: 5 problems in [tool.perflint] ({project / 'pyproject.toml'}):"
    assert lines[1:] == [
        "  - unknown key `selct` (did you mean `select`?)",
        "  - `select`: unknown rule selector `PFL999` (did you mean `PFL901`?)",
        "  - `select`: unknown rule selector `PLF201` (did you mean `PFL201`?)",
        "  - `extend-select`: unknown rule selector `tensor-itme` (did you mean `tensor-item`?)",
        "  - `unsafe-fixes` must be true or false",
    ]


def test_one_config_problem_is_one_line(project):
    (project / "ok.py").write_text(GOOD)
    (project / "pyproject.toml").write_text('[tool.perflint]\nselct = ["PFL2"]\n')
    result = run("check", "--no-cache", "ok.py")
    assert result.exit_code == 2
    assert result.stderr == (f"perflint: error: unknown key `selct` (did you mean `select`?) in [tool.perflint] "
                             f"({project / 'pyproject.toml'})\n")
    (project / "pyproject.toml").write_text('[tool.perflint]\nfrobnicate = 1\n')
    result = run("check", "--no-cache", "ok.py")
    assert "unknown key `frobnicate` (known keys: cache, cache-dir, exclude," in result.stderr


def test_every_unknown_selector_on_the_command_line_is_reported_at_once(project):
    (project / "ok.py").write_text(GOOD)
    result = run("check", "--no-cache", "--select", "PFL999,PLF201", "--ignore", "tensor-itme", "ok.py")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "perflint: error: 3 problems in the options:",
        "  - --select: unknown rule selector `PFL999` (did you mean `PFL901`?)",
        "  - --select: unknown rule selector `PLF201` (did you mean `PFL201`?)",
        "  - --ignore: unknown rule selector `tensor-itme` (did you mean `tensor-item`?)",
    ]
    assert run("rule", "PLF201").stderr == "perflint: error: unknown rule `PLF201` (did you mean `PFL201`?)\n"


# --------------------------------------------------------------------------- 5. broken pyproject.toml
def _project_with_broken_sub(project: Path, sub_config: str) -> None:
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (project / "ok.py").write_text(GOOD)
    (project / "sub").mkdir()
    (project / "sub" / "b.py").write_text(GOOD)
    (project / "sub" / "pyproject.toml").write_text(sub_config)


def test_a_broken_pyproject_without_perflint_settings_is_ignored_with_a_warning(project):
    """ruff stops (exit 2) on any pyproject.toml it meets that is not valid TOML; one that does
    not mention perflint cannot hold our settings, so perflint warns and goes on."""
    _project_with_broken_sub(project, '[project\nname = "typo"\n')
    for paths in (["ok.py"], ["."], ["sub/b.py"]):
        result = run("check", "--no-cache", "-j", "1", *paths)
        assert result.exit_code == 1, (paths, result.output)
        assert result.stderr.count("perflint: warning: cannot parse") == 1
        assert ("ignored: it does not mention perflint, so it has no [tool.perflint] table") in result.stderr
    assert "sub/b.py:4:14: PFL201" in result.stdout, "its files are checked with the settings above"


def test_a_pyproject_whose_project_table_is_wrong_does_not_matter(project):
    """Valid TOML with a bad [project] table (ruff 0.17 stops on `requires-python = 3`):
    perflint reads only [tool.perflint]."""
    _project_with_broken_sub(project, '[project]\nname = "x"\nrequires-python = 3\nlicense = ""\n')
    result = run("check", "--no-cache", "-j", "1", ".")
    assert result.exit_code == 1 and result.stderr == ""


def test_a_broken_pyproject_with_perflint_settings_stops_only_the_files_it_governs(project):
    _project_with_broken_sub(project, '[tool.perflint\nselect = ["PFL2"]\n')
    named = run("check", "--no-cache", "-j", "1", "ok.py")  # the project walk skips sub/, with a warning
    assert named.exit_code == 1, named.output
    assert "ok.py:4:14: PFL201" in named.stdout
    assert f"the files below {project / 'sub'} are not read for the project analysis" in named.stderr
    for paths in (["."], ["sub/b.py"]):  # what it governs is checked: an error, as in ruff
        result = run("check", "--no-cache", "-j", "1", *paths)
        assert result.exit_code == 2, (paths, result.output)
        assert f"perflint: error: cannot parse {project / 'sub' / 'pyproject.toml'}" in result.stderr


# --------------------------------------------------------------------------- 10. install hints
def _readme_bench_install() -> str:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    (line,) = [line for block in blocks for line in block.splitlines() if "[bench]" in line]
    return line.split("#", 1)[0].strip()


@pytest.mark.parametrize("command", [["bench", "--device", "cpu"], ["trace", "x.py"]])
def test_without_torch_the_install_hint_is_the_readmes_command(command, monkeypatch):
    import perflint.harness.command as bench_command
    import perflint.trace.command as trace_command

    monkeypatch.setattr(bench_command, "torch_available", lambda: False)
    monkeypatch.setattr(trace_command, "torch_available", lambda: False)
    result = run(*command)
    assert result.exit_code == 2
    assert f"perflint {command[0]} needs PyTorch" in result.stderr
    readme = _readme_bench_install()
    assert readme == 'pip install torch==2.13.0 && pip install ".[bench]"'
    assert [line.strip() for line in result.stderr.splitlines() if "pip" in line] == [readme]


# --------------------------------------------------------------------------- 6. what fix will do
LOADER = """\
import torch
from torch.utils.data import DataLoader

loader = DataLoader(dataset, batch_size=32, num_workers=4)
for images, labels in loader:
    images = images.to(device)
    loss = model(images).sum()
"""


def test_check_says_when_fix_may_fix_more_than_it_counts(project):
    """Pinning the loader (PFL104, unsafe) makes the copy a PFL105 finding, which the next
    round of `fix --unsafe-fixes` fixes too: 2 fixed where check counted 1."""
    (project / "train.py").write_text(LOADER)
    checked = run("check", "--no-cache", "-j", "1", "train.py")
    assert "1 more fix available with `--unsafe-fixes`" in checked.stdout
    assert ("Counted before fixing: fixing PFL104 can reveal PFL105 findings, so "
            "`perflint fix --unsafe-fixes` may fix more.") in checked.stdout
    fixed = run("fix", "--no-cache", "-j", "1", "--unsafe-fixes", "--show-fixes", "train.py")
    assert "Fixed 2 findings" in fixed.output and "PFL105" in fixed.output
    ignored = run("check", "--no-cache", "-j", "1", "--ignore", "PFL105", "train.py")
    assert "Counted before fixing" not in ignored.stdout, "PFL105 does not run: nothing to reveal"


def _fix_corpus():
    from perflint.registry import all_rules

    for rule in all_rules():
        for index, case in enumerate([*rule.invalid, *rule.valid]):
            yield f"{rule.code}-{index}.py", case.source()
    for path in sorted((Path(__file__).resolve().parent.parent / "examples").rglob("*.py")):
        yield path.name, path.read_text(encoding="utf-8")


def test_every_finding_a_fix_reveals_is_declared_by_the_fixing_rule():
    """`Rule.fix_reveals` is what lets `check` say that `fix` may do more: every rule whose
    fixes make other findings appear (and get fixed) on the examples declares them."""
    from perflint.api import check_source, fix_source
    from perflint.fixes import applicable
    from perflint.registry import rule_for

    for name, source in _fix_corpus():
        before = {d.code for d in check_source(source, name, select=["ALL"]) if applicable(d, True)}
        after = {d.code for d in fix_source(source, name, unsafe=True, select=["ALL"]).fixed}
        declared = {code for fixer in before for code in rule_for(fixer).fix_reveals}
        assert after - before <= declared, (name, sorted(before), sorted(after - before))

"""Reach across modules (issue #12, part 3).

Each directory under `tests/fixtures/projects/` is a small project of its own (its own
`pyproject.toml`) written in the shape of a real repository: the training loop in one
module, the loader built in another, hooks called through a list, helpers calling helpers
in a third file. A trailing `# expect: PFL201` (or `# expect: PFL103, PFL104`) marks every
finding perflint must report on that line; a line without a marker must stay silent. Each
project also holds negative twins: the same shapes where the code does not run every step
(called once after training, once per epoch, throttled to every N iterations, from a hook
that runs at the end of training), and those must not be reported.

`test_whole_project` checks the project directory as a whole, once per project, and
compares the findings of one file with that file's markers; together the cases of a
project compare the whole project exactly (a finding in any file is either expected or
fails). `test_named_alone` checks each file named alone (what pre-commit does): its
findings must not depend on which other files were named. Known misses are strict xfails:
a case that starts passing must leave the list.

Findings are compared as sets of (file, line, code): two findings of one code on one line
(`x[m] == y[m]`) are one expectation.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perflint.api import check_paths
from perflint.config import SettingsResolver

PROJECTS = Path(__file__).parent / "fixtures" / "projects"
_EXPECT = re.compile(r"#\s*expect:\s*(PFL\d{3}(?:\s*,\s*PFL\d{3})*)\s*$")

Finding = tuple[str, int, str]  # (path relative to the project, 1-based line, code)


def project_names() -> list[str]:
    return sorted(p.name for p in PROJECTS.iterdir() if (p / "pyproject.toml").is_file())


def project_files(project: str) -> list[str]:
    root = PROJECTS / project
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))


def expected_findings(project: str, file: str | None = None) -> set[Finding]:
    root = PROJECTS / project
    found: set[Finding] = set()
    for rel in [file] if file else project_files(project):
        for row, line in enumerate((root / rel).read_text(encoding="utf-8").splitlines(), start=1):
            match = _EXPECT.search(line)
            if match:
                found.update((rel, row, code.strip()) for code in match.group(1).split(","))
    return found


def run_perflint(project: str, paths: list[Path]) -> set[Finding]:
    """perflint through the library API, in this process, from the project directory."""
    root = PROJECTS / project
    report = check_paths(paths, SettingsResolver(root), jobs=1, cache=None)
    assert report.file_errors == 0, [d for d in report.diagnostics if d.code == "PFL001"]
    assert not report.missing, report.missing
    findings: set[Finding] = set()
    for d in report.diagnostics:
        path = Path(d.path)
        rel = (path.resolve().relative_to(root.resolve()) if path.is_absolute() else path).as_posix()
        findings.add((rel, d.location.row, d.code))
    return findings


def describe(findings: set[Finding], root: Path) -> str:
    lines = []
    for rel, row, code in sorted(findings):
        try:
            text = (root / rel).read_text(encoding="utf-8").splitlines()[row - 1].strip()
        except (OSError, IndexError):
            text = "?"
        lines.append(f"    {rel}:{row} {code}    | {text}")
    return "\n".join(lines) or "    (none)"


def assert_same(project: str, found: set[Finding], expected: set[Finding], what: str) -> None:
    missing, unexpected = expected - found, found - expected
    if missing or unexpected:
        root = PROJECTS / project
        pytest.fail(f"{project} ({what}):\n  missing (expected, not reported):\n{describe(missing, root)}\n"
                    f"  unexpected (reported, no `# expect:` marker):\n{describe(unexpected, root)}",
                    pytrace=False)


# --------------------------------------------------------------------------- known misses
# (project, file) -> what the whole-project analysis does not reach today, and why. Each
# expectation was checked against the project merged into one file: "(also in a single
# file)" means the merged file misses it too, otherwise only the split across modules does.
WHOLE_PROJECT_XFAIL: dict[tuple[str, str], str] = {
}


def _cases(xfails: dict[tuple[str, str], str], default: str | None = None) -> list:
    cases = []
    for project in project_names():
        for file in project_files(project):
            marks = []
            why = xfails.get((project, file)) or default
            if why:
                marks.append(pytest.mark.xfail(reason=why, strict=True))
            cases.append(pytest.param(project, file, marks=marks, id=f"{project}/{file}"))
    return cases


_whole_runs: dict[str, set[Finding]] = {}


@pytest.mark.parametrize(("project", "file"), _cases(WHOLE_PROJECT_XFAIL))
def test_whole_project(project: str, file: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root = PROJECTS / project
    monkeypatch.chdir(root)
    if project not in _whole_runs:
        _whole_runs[project] = run_perflint(project, [Path(".")])
    findings = _whole_runs[project]
    assert {f[0] for f in findings} <= set(project_files(project))
    found = {f for f in findings if f[0] == file}
    assert_same(project, found, expected_findings(project, file), f"{file}, whole project checked")


# Named alone (as pre-commit names staged files), a file reports exactly its part of the
# whole project's findings: it misses what the whole project misses, and nothing more.
NAMED_ALONE_XFAIL = {key: f"as in the whole project: {why}" for key, why in WHOLE_PROJECT_XFAIL.items()}


@pytest.mark.parametrize(("project", "file"), _cases(NAMED_ALONE_XFAIL))
def test_named_alone(project: str, file: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROJECTS / project)
    found = run_perflint(project, [Path(file)])
    assert {f[0] for f in found} <= {file}
    assert_same(project, found, expected_findings(project, file), f"{file} named alone")


def test_every_project_is_a_project_root() -> None:
    """Each fixture is its own project (a `[project]` name), and every project has both
    expected findings and files that must stay silent."""
    names = project_names()
    assert len(names) >= 8
    for project in names:
        text = (PROJECTS / project / "pyproject.toml").read_text(encoding="utf-8")
        assert re.search(r"(?m)^\[project\]\s*\nname\s*=", text), project
        assert expected_findings(project), project
        silent = [f for f in project_files(project) if not expected_findings(project, f)]
        assert silent, project


def test_expect_markers_are_well_formed() -> None:
    """A marker with a typo (`# expect PFL201`, `# expects: ...`) would silently expect nothing."""
    loose = re.compile(r"#\s*expect", re.IGNORECASE)
    for project in project_names():
        root = PROJECTS / project
        for rel in project_files(project):
            for row, line in enumerate((root / rel).read_text(encoding="utf-8").splitlines(), start=1):
                if loose.search(line):
                    assert _EXPECT.search(line), f"{project}/{rel}:{row}: malformed marker: {line.strip()}"

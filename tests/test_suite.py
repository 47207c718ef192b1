"""The test suite itself stays fast (issue 15 item 12): the README's test command runs it on
every core, CI runs exactly that command, and few tests start processes."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from conftest import SUBPROCESS_BUDGET

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def _readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    (line,) = [line for block in blocks for line in block.splitlines() if "pytest" in line]
    return line.strip()


def test_ci_runs_exactly_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    readme = shlex.split(_readme_test_command())
    runs = [shlex.split(line) for line in ci.splitlines() if "pytest" in line and not line.lstrip().startswith("#")]
    assert len(runs) == 1
    assert [word for word in runs[0] if word != "--quiet"] == readme  # CI adds pip's --quiet only


def test_the_readmes_test_command_runs_on_every_core_and_prints_the_summary():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    addopts = shlex.split(options["addopts"])
    assert "-n" in addopts and addopts[addopts.index("-n") + 1] == "auto"
    assert addopts.count("-q") <= 1, "-qq would hide pytest's closing 'N passed' line, which CI reads"


def test_few_tests_start_processes(request):
    marked = [item.nodeid for item in request.session.items if item.get_closest_marker("subprocess")]
    assert len(marked) <= SUBPROCESS_BUDGET, marked

"""The shipped examples.

- `perflint check examples/` reports every planted anti-pattern and nothing else: each planted
  line carries a trailing comment naming the codes that must report it (`# PFL201`, or
  `# PFL103: why; PFL104: why`), one code per expected finding.
- `examples/<name>.py` and its committed `examples/fixed/<name>.py`: the fixed file is exactly
  what `perflint fix --unsafe-fixes` makes of the original, and both print the same results on
  the CPU (each example is seeded and prints what it computed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflint.cli import main
from perflint.registry import all_rules

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PAIRS = sorted(p for p in EXAMPLES.glob("*.py") if (EXAMPLES / "fixed" / p.name).is_file())
CODE = re.compile(r"\bPFL\d{3}\b")


def planted(path: Path) -> Counter:
    """(row, code) -> how many findings the comment on that row plants."""
    expected: Counter = Counter()
    for row, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        hash_at = line.find("#")
        if hash_at < 0:
            continue
        for code in CODE.findall(line[hash_at:]):
            expected[(row, code)] += 1
    return expected


def _perflint(*args: str):
    """`perflint check` in the repository root, in this process."""
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        return CliRunner().invoke(main, ["check", "--no-cache", "--no-respect-gitignore", *args])
    finally:
        os.chdir(old)


def test_examples_report_exactly_the_planted_findings():
    result = _perflint("--output-format", "json", "examples")
    assert result.exit_code == 1, result.output
    findings = json.loads(result.stdout)
    listed = _perflint("--show-files", "examples")
    scripts = [ROOT / line for line in listed.stdout.splitlines() if line.endswith(".py")]
    assert EXAMPLES / "train.py" in scripts and EXAMPLES / "segmentation" / "train.py" in scripts
    assert not [p for p in scripts if "fixed" in p.name or "fixed" in p.parent.name], "fixed copies are excluded"
    for path in scripts:
        rel = path.relative_to(ROOT).as_posix()
        got = Counter((f["location"]["row"], f["code"]) for f in findings if f["filename"] == rel)
        want = planted(path)
        assert got == want, f"{rel}: unexpected {dict(got - want)}, missing {dict(want - got)}"


def test_every_planted_code_is_a_rule():
    codes = {r.code for r in all_rules()}
    for path in EXAMPLES.rglob("*.py"):
        unknown = {code for _, code in planted(path)} - codes
        assert not unknown, f"{path.name} plants codes no rule has: {sorted(unknown)}"


def _run(script: Path) -> str:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300,
                          cwd=script.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), f"{script.name} must print its results"
    return done.stdout


def test_there_is_at_least_one_example_pair():
    assert PAIRS, "examples/ needs a script with a committed examples/fixed/ counterpart"


@pytest.mark.parametrize("original", PAIRS, ids=lambda p: p.name)
def test_fixed_example_is_what_perflint_fix_produces(original, tmp_path, monkeypatch):
    copy = tmp_path / original.name
    shutil.copyfile(original, copy)
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, ["fix", "--unsafe-fixes", "-q", copy.name])
    assert done.exit_code in (0, 1), done.output
    assert copy.read_bytes() == (EXAMPLES / "fixed" / original.name).read_bytes(), (
        "examples/fixed is stale: regenerate it with `perflint fix --unsafe-fixes`"
    )
    assert copy.read_bytes() != original.read_bytes(), "the example should have something to fix"


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("original", PAIRS, ids=lambda p: p.name)
def test_original_and_fixed_example_compute_the_same_results(original):
    assert _run(original) == _run(EXAMPLES / "fixed" / original.name)

"""`examples/<name>.py` and its committed `examples/fixed/<name>.py`: the fixed file is
exactly what `perflint fix --unsafe-fixes` makes of the original, and both print the same
results on the CPU (each example is seeded and prints what it computed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PAIRS = sorted(p for p in EXAMPLES.glob("*.py") if (EXAMPLES / "fixed" / p.name).is_file())


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
def test_fixed_example_is_what_perflint_fix_produces(original, tmp_path):
    copy = tmp_path / original.name
    shutil.copyfile(original, copy)
    done = subprocess.run([sys.executable, "-m", "perflint", "fix", "--unsafe-fixes", "-q", copy.name],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    assert copy.read_bytes() == (EXAMPLES / "fixed" / original.name).read_bytes(), (
        "examples/fixed is stale: regenerate it with `perflint fix --unsafe-fixes`"
    )
    assert copy.read_bytes() != original.read_bytes(), "the example should have something to fix"


@pytest.mark.torch
@pytest.mark.parametrize("original", PAIRS, ids=lambda p: p.name)
def test_original_and_fixed_example_compute_the_same_results(original):
    assert _run(original) == _run(EXAMPLES / "fixed" / original.name)

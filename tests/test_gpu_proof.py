"""benchmarks/gpu_proof.sh, the GPU proof in one command, run on its CPU path so it cannot rot."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_proof.sh"


@pytest.mark.subprocess
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_cpu_path_writes_every_file_the_docs_read(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable)
    done = subprocess.run(["bash", str(SCRIPT), "--device", "cpu", "--out", str(tmp_path), "--rule", "PFL201"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads((tmp_path / "cpu.json").read_text())
    assert [entry["code"] for entry in run["rules"]] == ["PFL201"] and run["passed"]
    assert run["endtoend"]["results_match"]
    summaries = json.loads((tmp_path / "rule_summaries.json").read_text())
    assert summaries["rules"]["PFL201"]["cpu"]["syncs_bad"] == 1
    assert (tmp_path / "cpu-speedups.png").read_bytes()[:4] == b"\x89PNG"
    assert "| PFL201 |" in (tmp_path / "cpu-bench.md").read_text()
    before = json.loads((tmp_path / "trace-cpu-train.json").read_text())
    after = json.loads((tmp_path / "trace-cpu-train_fixed.json").read_text())
    assert all(site["code"] == "PFL901" for site in before + after)
    assert 0 < len(after) < len(before)


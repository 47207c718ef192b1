"""`perflint bench` from the command line (without torch: tests/test_without_torch.py)."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from perflint.cli import main


@pytest.mark.torch
def test_bench_one_rule_as_json():
    result = CliRunner().invoke(main, ["bench", "--device", "cpu", "--rule", "PFL201", "--output-format", "json"])
    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout)
    assert run["kind"] == "cpu" and "No speed is measured on a CPU" in run["note"]
    (entry,) = run["rules"]
    assert entry["code"] == "PFL201" and entry["passed"]
    assert entry["check"]["syncs_bad"] == [1, 1, 1] and entry["check"]["syncs_good"] == [0, 0, 0]
    assert "timed" not in entry  # no timing on a CPU
    assert "[1/1] PFL201" in result.stderr and "no speed is measured on a CPU" in result.stderr


@pytest.mark.torch
def test_bench_table_output_dir_and_plot(tmp_path):
    args = ["bench", "--device", "cpu", "--rule", "PFL211,tensor-item", "--seeds", "1",
            "--output-dir", str(tmp_path / "out")]
    try:
        import matplotlib  # noqa: F401

        args += ["--plot", str(tmp_path / "chart.png")]
    except ImportError:
        pass
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "PFL201" in result.stdout and "PFL211" in result.stdout and "2 rules checked, 2 passed." in result.stdout
    assert (tmp_path / "out" / "cpu.json").exists() and (tmp_path / "out" / "rule_summaries.json").exists()
    if "--plot" in args:
        assert (tmp_path / "chart.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.torch
def test_plot_without_matplotlib_is_a_usage_error(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # `import matplotlib` raises ImportError
    result = CliRunner().invoke(main, ["bench", "--device", "cpu", "--rule", "PFL201", "--plot", str(tmp_path / "c.png")])
    assert result.exit_code == 2
    assert "--plot needs matplotlib" in result.stderr


@pytest.mark.torch
def test_unknown_rule_and_unavailable_cuda_are_usage_errors():
    result = CliRunner().invoke(main, ["bench", "--device", "cpu", "--rule", "PFL999"])
    assert result.exit_code == 2 and "unknown rule selector" in result.stderr
    import torch

    if not torch.cuda.is_available():
        result = CliRunner().invoke(main, ["bench", "--device", "cuda", "--rule", "PFL201"])
        assert result.exit_code == 2 and "CUDA is not available" in result.stderr


def test_timing_minimums_are_enforced():
    result = CliRunner().invoke(main, ["bench", "--repeats", "3"])
    assert result.exit_code == 2
    result = CliRunner().invoke(main, ["bench", "--steps", "10"])
    assert result.exit_code == 2

"""`perflint bench` from the command line, including without torch installed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from perflint.cli import main

HIDE = "import sys; sys.modules[{name!r}] = None; from perflint.cli import main; main({argv!r})"


def _hidden(name: str, argv: list[str], cwd=None) -> subprocess.CompletedProcess:
    code = HIDE.format(name=name, argv=argv)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_without_torch_bench_says_how_to_install_and_exits_2():
    done = _hidden("torch", ["bench", "--device", "cpu"])
    assert done.returncode == 2, done.stderr
    assert 'pip install torch==2.13.0 && pip install ".[bench]"' in done.stderr  # the README's command
    assert "--index-url" not in done.stderr
    assert "Traceback" not in done.stderr


def test_without_torch_the_linter_still_works(tmp_path):
    target = tmp_path / "train.py"
    target.write_text("for x, y in loader:\n    loss = criterion(model(x), y)\n    total += loss.item()\n")
    done = _hidden("torch", ["check", str(target)])
    assert done.returncode == 1, done.stderr
    assert "PFL201" in done.stdout


def test_docs_generation_does_not_need_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "from pathlib import Path\nfrom perflint.docs import generated_files\n"
            "files = generated_files(Path('docs'))\n"
            "assert any(p.name == 'benchmarks.md' for p in files)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    assert done.returncode == 0, done.stderr


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
def test_plot_without_matplotlib_is_a_usage_error(tmp_path):
    done = _hidden("matplotlib", ["bench", "--device", "cpu", "--rule", "PFL201", "--plot", str(tmp_path / "c.png")])
    assert done.returncode == 2
    assert "--plot needs matplotlib" in done.stderr


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

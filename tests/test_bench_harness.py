"""The harness pieces: result comparison, A/B timing statistics, the device path on a CPU
(proof skipped, timings marked), reports, summaries and the chart. CUDA-only tests skip
cleanly without a GPU."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from perflint.harness import report  # noqa: E402
from perflint.harness.compare import compare_results, same_structure  # noqa: E402
from perflint.harness.cuda import (  # noqa: E402
    CPU_TIMING_NOTE,
    SKIPPED_NO_CUDA,
    bench_on_device,
    count_runtime_calls,
    environment,
    profile_runtime_calls,
    sync_debug_proof,
)
from perflint.harness.runner import run_bench  # noqa: E402
from perflint.harness.timing import FASTER, NOISE, SLOWER, Stats, time_ab, verdict  # noqa: E402
from perflint.registry import rule_for  # noqa: E402

TINY = {"size": 8, "repeats": 7, "steps": 50, "ratios": (1.0,), "dims": (4, 8, 16)}


# ----------------------------------------------------------------------------- comparison
def test_numbers_compare_with_tensors_by_value():
    loss = torch.tensor(0.1234567, dtype=torch.float32)
    assert compare_results(loss.item(), loss.detach()).ok  # float32 -> Python float is exact
    assert not compare_results(0.1234567, loss).ok  # the double 0.1234567 is not that float32
    assert compare_results(3, torch.tensor(3)).ok
    assert not compare_results(3, torch.tensor(4)).ok


def test_nan_equals_nan_and_shapes_must_match():
    a = torch.tensor([1.0, float("nan")])
    assert compare_results(a, a.clone()).ok
    assert not compare_results(a, torch.tensor([1.0, 2.0])).ok
    assert not compare_results(torch.zeros(2), torch.zeros(3)).ok


def test_close_mode_tolerates_rounding_but_not_errors():
    a = torch.tensor([1.0, 2.0])
    assert not compare_results(a, a + 1e-7).ok
    assert compare_results(a, a + 1e-7, "close").ok
    assert not compare_results(a, a + 1e-2, "close").ok


def test_containers_and_structure():
    assert compare_results({"a": [1, torch.tensor(2.0)]}, {"a": [1, 2.0]}).ok
    assert not compare_results([1, 2], [1]).ok
    assert same_structure(torch.randn(3), torch.randn(3)).ok
    assert not same_structure(torch.randn(3), torch.randn(4)).ok


# ----------------------------------------------------------------------------- timing
def test_quartiles_and_verdicts():
    s = Stats((1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0))
    assert (s.q1, s.median, s.q3, s.iqr) == (2.5, 4.0, 5.5, 3.0)
    slow, fast = Stats((10.0, 11, 12, 13, 14, 15, 16)), Stats((1.0, 2, 3, 4, 5, 6, 7))
    assert verdict(slow, fast) == FASTER
    assert verdict(fast, slow) == SLOWER
    assert verdict(slow, Stats((9.0, 12, 13, 14, 15, 16, 20))) == NOISE


def test_time_ab_alternates_and_synchronises_around_every_block():
    calls = []

    def step(name):
        return lambda: calls.append(name)

    syncs = []
    result = time_ab(step("a"), step("b"), lambda: syncs.append(len(calls)), repeats=7, steps=50, warmup=2)
    assert len(result.bad.samples) == len(result.good.samples) == 7
    blocks = [calls[i] for i in range(4, len(calls), 50)]  # first call of each block, after warm-up
    assert blocks == ["a", "b", "b", "a"] * 3 + ["a", "b"]
    assert len(syncs) == 1 + 2 * 2 * 7  # after warm-up, then before and after every block
    assert result.to_json()["verdict"] in (FASTER, SLOWER, NOISE)


# ----------------------------------------------------------------------------- device path on a CPU
def test_device_path_runs_on_cpu_with_the_proof_skipped():
    result = bench_on_device(rule_for("PFL201"), "cpu", **TINY)
    assert result["proof"] == {"status": SKIPPED_NO_CUDA}
    assert result["note"] == CPU_TIMING_NOTE
    timing = result["timing"]
    assert timing["repeats"] == 7 and timing["steps"] == 50
    assert len(timing["bad"]["samples_us"]) == 7 and timing["bad"]["median_us"] > 0
    assert timing["verdict"] in (FASTER, SLOWER, NOISE)
    assert [p["target_ratio"] for p in result["sweep"]] == [1.0]
    assert result["t_cpu_us"] > 0


def test_device_path_runs_cuda_calls_of_a_form_on_a_cpu_build():
    from perflint.rule import Benchmark

    class Fake:
        code, name = "PFL999", "fake-sync"
        benchmark = Benchmark(setup="x = torch.ones(size, device=device)",
                              bad="torch.cuda.synchronize()\nresult = x.sum()", good="result = x.sum()")

    result = bench_on_device(Fake, "cpu", **TINY)  # type: ignore[arg-type]
    assert result["proof"] == {"status": SKIPPED_NO_CUDA}


def test_epoch_pairs_are_timed_once_without_queued_gpu_work():
    from perflint.rule import Benchmark

    class Fake:
        code, name = "PFL998", "fake-epoch"
        benchmark = Benchmark(setup="x = torch.ones(size, device=device)", bad="result = x.sum()",
                              good="result = x.sum()", claim="time", steps=3, sweep=False)

    result = bench_on_device(Fake, "cpu", **TINY)  # type: ignore[arg-type]
    assert [(p["work_dim"], p["steps"]) for p in result["sweep"]] == [(0, 3)]
    assert result["timing"]["repeats"] == 7


def test_environment_records_the_device_and_versions():
    env = environment(torch.device("cpu"))
    assert env["kind"] == "cpu" and env["torch"] == torch.__version__ and env["date"][:2] == "20"


def test_sync_debug_proof_classifies_and_always_restores_the_mode(monkeypatch):
    """The proof's logic, with the CUDA debug mode faked (the real one needs a GPU)."""
    mode = {"value": 0}
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: mode["value"])
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", lambda value: mode.update(value=value))

    def syncing():
        if mode["value"] == "error":
            raise RuntimeError("called a synchronizing CUDA operation")

    def broken():
        raise ValueError("bad snippet")

    assert sync_debug_proof(syncing) == "synced" and mode["value"] == 0
    assert sync_debug_proof(lambda: None) == "no sync" and mode["value"] == 0
    assert sync_debug_proof(broken) == "error: ValueError: bad snippet" and mode["value"] == 0


def test_profiler_path_runs_without_cuda():
    counts = profile_runtime_calls(lambda: torch.randn(3).sum())
    assert counts["syncs"] == 0 and set(counts) >= {"cudaStreamSynchronize", "cudaMemcpyAsync"}


def test_runtime_call_counting():
    names = ["cudaLaunchKernel", "cudaStreamSynchronize", "cudaMemcpyAsync", "cudaMemcpy", "cudaMemcpy2DAsync",
             "cudaDeviceSynchronize", "cudaEventSynchronize", "aten::item", "cudaFree", "cudaFreeHost"]
    counts = count_runtime_calls(names)
    assert counts["cudaStreamSynchronize"] == 1 and counts["cudaMemcpyAsync"] == 2 and counts["cudaMemcpy"] == 1
    # cudaFree waits for the device (what empty_cache() stalls on); seen on an H100
    assert counts["cudaFree"] == 1 and counts["syncs"] == 5


# ----------------------------------------------------------------------------- runs, reports, docs
@pytest.fixture(scope="module")
def timed_cpu_run():
    return run_bench([rule_for("PFL201"), rule_for("PFL211")], torch.device("cpu"), seeds=(0,),
                     timing=True, ratios=(1.0,), size=8, dims=(4, 8, 16))


def test_run_reports_in_every_format(timed_cpu_run):
    run = timed_cpu_run
    assert run["passed"] and run["kind"] == "cpu"
    table = report.render(run, "table")
    assert "No speed is measured on a CPU" in table
    assert "skipped: no CUDA" in table and "CPU: not a speed claim" in table
    assert "PFL201" in table and "1→0" in table
    markdown = report.render(run, "markdown")
    assert markdown.count("| PFL2") == 2
    assert json.loads(report.render(run, "json"))["rules"][0]["code"] == "PFL201"


def test_cpu_timings_never_reach_the_summaries(timed_cpu_run, tmp_path):
    paths = report.write_outputs(timed_cpu_run, tmp_path)
    assert [p.name for p in paths] == ["cpu.json", "rule_summaries.json"]
    summaries = report.load_summaries(tmp_path / "rule_summaries.json")
    entry = summaries["rules"]["PFL201"]
    assert entry["gpu"] is None and entry["cpu"]["syncs_bad"] == 1 and entry["cpu"]["syncs_good"] == 0
    section = report.measured_section("PFL201", summaries)
    assert section.startswith("No GPU run yet; CPU check: syncs bad→good 1→0, results equal")
    assert "µs" not in section


def test_summaries_merge_keeps_other_rules_and_kinds(timed_cpu_run):
    first = report.merge_summaries(report.empty_summaries(), timed_cpu_run, "cpu.json")
    gpu_like = json.loads(json.dumps(timed_cpu_run))
    gpu_like["kind"] = "cuda"
    gpu_like["rules"] = gpu_like["rules"][:1]
    merged = report.merge_summaries(first, gpu_like, "cuda-x.json")
    assert merged["rules"]["PFL201"]["cpu"] == first["rules"]["PFL201"]["cpu"]
    assert merged["rules"]["PFL201"]["gpu"]["run"] == "cuda-x.json"
    assert merged["rules"]["PFL211"]["gpu"] is None
    # a GPU entry renders its timing paragraph first (a wording test: the numbers are CPU ones)
    text = report.measured_section("PFL201", merged)
    assert text.startswith("**GPU**") and "a step took" in text and "×" in text
    assert "CPU check: syncs bad→good 1→0, results equal" in text


def test_plot_writes_a_png(timed_cpu_run, tmp_path):
    pytest.importorskip("matplotlib")
    from perflint.harness.plot import plot_run

    cpu_only = json.loads(json.dumps(timed_cpu_run))
    for entry in cpu_only["rules"]:
        entry.pop("timed")
    for run, name in ((cpu_only, "syncs.png"), (timed_cpu_run, "timed.png")):
        path = plot_run(run, tmp_path / name)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_benchmarks_page_says_gpu_figures_are_pending_without_a_gpu_run(timed_cpu_run):
    summaries = report.merge_summaries(report.empty_summaries(), timed_cpu_run, "cpu.json")
    page = report.benchmarks_markdown(summaries, {"PFL201": "tensor-item", "PFL211": "nonzero"}, [])
    assert "GPU figures are pending" in page
    assert "| [PFL201 tensor-item](rules/tensor-item.md) | 1→0 | equal | pending |" in page


# ----------------------------------------------------------------------------- CUDA only
@pytest.mark.cuda
def test_cuda_sync_debug_mode_sees_item_and_not_a_device_sum():
    x = torch.randn(1024, device="cuda")
    assert sync_debug_proof(lambda: x.sum().item()) == "synced"
    assert sync_debug_proof(lambda: x.sum()) == "no sync"
    assert torch.cuda.get_sync_debug_mode() == 0


@pytest.mark.cuda
def test_cuda_profiler_counts_explicit_synchronize():
    counts = profile_runtime_calls(torch.cuda.synchronize)
    assert counts["cudaDeviceSynchronize"] >= 1


@pytest.mark.cuda
def test_cuda_bench_proves_the_item_sync():
    result = bench_on_device(rule_for("PFL201"), "cuda", repeats=7, steps=50, ratios=(1.0,))
    assert result["proof"]["debug_mode"] == {"bad": "synced", "good": "no sync"}
    assert result["proof"]["proved"]
    assert not math.isnan(result["timing"]["speedup"])


def test_lists_compare_with_tensors_by_value():
    t = torch.tensor([[1, 2], [3, 4]])
    assert compare_results(t.tolist(), t).ok and compare_results(t, t.tolist()).ok
    assert not compare_results([[1, 2], [3, 5]], t).ok
    f = torch.tensor([0.1, 0.2], dtype=torch.float32)
    assert compare_results(f.tolist(), f).ok
    assert not compare_results([[1, 2], [3]], t).ok  # ragged: not the same


def test_lint_problems_fail_the_check():
    from perflint.harness.verify import Verification

    ok = Verification("PFL999", "x", "", "syncs", "cpu", 8, [0], [1], [0], "equal", lint_bad=1, lint_good=0)
    assert ok.passed
    silent = Verification("PFL999", "x", "", "syncs", "cpu", 8, [0], [1], [0], "equal", lint_bad=0, lint_good=0)
    assert silent.problems == ["the linter does not report the bad form"]
    noisy = Verification("PFL999", "x", "", "syncs", "cpu", 8, [0], [1], [0], "equal", lint_bad=1, lint_good=2)
    assert noisy.problems == ["the linter reports the good form"]
    same = Verification("PFL999", "x", "", "syncs", "cpu", 8, [0], [1], [1], "equal")
    assert not same.passed and "does not sync less" in same.problems[0]
    timed = Verification("PFL999", "x", "", "time", "cpu", 8, [0], [0], [0], "equal")
    assert timed.passed  # a claim about time is not checked by sync counts

"""The CUDA path: prove the sync, then time whole steps with realistic GPU work queued first.

Method (sync-catalog.md §4):

1. Warm up (cuBLAS handles, lazy init, allocator growth).
2. Proof: one step of each form under `torch.cuda.set_sync_debug_mode("error")` (restored in
   `finally`): the bad form must raise "called a synchronizing CUDA operation", the good one
   must not. The debug mode misses `torch.cuda.synchronize()`, `empty_cache()` and other
   driver-level waits, so the same step also runs under `torch.profiler` and the CUDA
   runtime calls that wait are counted (`cudaStreamSynchronize`, `cudaDeviceSynchronize`,
   `cudaEventSynchronize`, blocking `cudaMemcpy`; `cudaMemcpyAsync` is listed too), minus
   what an empty step under the profiler shows.
3. Timing: a step is `work()` (one GEMM whose size sets the GPU time, T_gpu) followed by the
   form. A sync costs about min(T_cpu, T_gpu) per step, so timing the pattern alone would
   understate it. The GEMM size is swept so that T_gpu/T_cpu goes from about 0.1 to 10;
   each point is an A/B comparison (`timing.time_ab`: >= 7 repeats of >= 50 steps,
   alternating, median and IQR, a verdict only beyond the spread). The headline figure is
   the point nearest T_gpu = T_cpu, where the saving is largest.

On a CPU device the same code runs with the proof marked "skipped: no CUDA" and a no-op
synchronize; its timings are not a speed claim (there is nothing to wait for) and reports
say so. That keeps the timing and reporting paths tested in CI, which has no GPU.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch

from perflint.rule import Rule

from .probe import SyncProbe
from .snippets import compile_snippet, snippet_filename
from .timing import MIN_REPEATS, MIN_STEPS, ABResult, time_ab, time_block
from .verify import new_namespace, seed_everything, teardown

SKIPPED_NO_CUDA = "skipped: no CUDA"
CPU_TIMING_NOTE = ("CPU run: no speed is measured on a CPU (there is no device to wait for); "
                   "these timings only exercise the harness")
DEFAULT_RATIOS = (0.1, 0.3, 1.0, 3.0, 10.0)
WORK_DIMS = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
# cudaFree waits for the whole device before it returns memory (an implicit synchronize).
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaFree")


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def driver_version() -> str | None:
    """The NVIDIA driver version from nvidia-smi (None when it cannot be read)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    line = out.stdout.strip().splitlines()
    return line[0].strip() if out.returncode == 0 and line else None


def environment(device: torch.device) -> dict[str, Any]:
    """What a result was measured on: device model, driver, torch version, date."""
    env: dict[str, Any] = {
        "kind": device.type, "torch": torch.__version__, "python": platform.python_version(),
        "platform": platform.platform(), "date": now_utc(),
    }
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        env.update({
            "gpu": props.name, "capability": f"{props.major}.{props.minor}",
            "gpu_memory_gib": round(props.total_memory / 2**30, 1), "cuda": torch.version.cuda,
            "driver": driver_version(), "cudnn": torch.backends.cudnn.version(),
        })
    else:
        env.update({"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()})
    return env


def synchronizer(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


# ----------------------------------------------------------------------------- proof
def sync_debug_proof(step: Callable[[], Any]) -> str:
    """Run one step with `set_sync_debug_mode("error")`: "synced", "no sync" or "error: ..."."""
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
    except RuntimeError as exc:
        if "synchroniz" in str(exc):
            return "synced"
        return f"error: {type(exc).__name__}: {exc}"
    except Exception as exc:  # the form itself failed: report, do not hide it
        return f"error: {type(exc).__name__}: {exc}"
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    return "no sync"


def count_runtime_calls(names: Iterable[str]) -> dict[str, int]:
    """Count the CUDA runtime calls that make the host wait, by name.

    `cudaMemcpy` (without Async) is blocking; `cudaMemcpyAsync` is counted separately (a
    blocking `.to()` shows as cudaMemcpyAsync + cudaStreamSynchronize). `syncs` sums the
    waiting calls.
    """
    counts = {name: 0 for name in SYNC_CALLS}
    counts["cudaMemcpyAsync"] = 0
    for name in names:
        if name in counts:
            counts[name] += 1
        elif name.startswith("cudaMemcpy"):
            key = "cudaMemcpyAsync" if "Async" in name else "cudaMemcpy"
            counts[key] += 1
    counts["syncs"] = sum(counts[name] for name in SYNC_CALLS)
    return counts


def profile_runtime_calls(step: Callable[[], Any]) -> dict[str, int]:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        step()
    return count_runtime_calls(event.name for event in prof.events())


def subtract(counts: dict[str, int], baseline: dict[str, int]) -> dict[str, int]:
    return {key: max(0, value - baseline.get(key, 0)) for key, value in counts.items()}


# ----------------------------------------------------------------------------- GPU work
class MatmulWork:
    """One GEMM of `dim`x`dim` per step: GPU time that a sync has to wait for, at one launch's CPU cost."""

    def __init__(self, device: torch.device, dim: int) -> None:
        self.dim = dim
        if dim > 0:
            generator = torch.Generator(device="cpu").manual_seed(1234)
            self.a = torch.randn(dim, dim, generator=generator).to(device)
            self.b = (torch.randn(dim, dim, generator=generator) / dim**0.5).to(device)
            self.out = torch.empty_like(self.a)

    def __call__(self) -> None:
        if self.dim > 0:
            torch.mm(self.a, self.b, out=self.out)


def work_time(device: torch.device, dim: int, launches: int = 20) -> float:
    """Seconds of device time per launch of `MatmulWork(dim)` (CUDA events; wall time on a CPU)."""
    work = MatmulWork(device, dim)
    for _ in range(3):
        work()
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(launches):
            work()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0 / launches
    return time_block(work, launches, lambda: None)


def calibrate(device: torch.device, t_cpu: float, ratios: Iterable[float],
              dims: Iterable[int] = WORK_DIMS) -> list[tuple[float, int, float]]:
    """For each target T_gpu/T_cpu ratio: (ratio, GEMM dim, measured T_gpu in seconds)."""
    ratios = sorted(ratios)
    ladder: list[tuple[int, float]] = []
    for dim in dims:
        ladder.append((dim, work_time(device, dim)))
        if ladder[-1][1] > ratios[-1] * t_cpu * 1.5:
            break
    chosen = []
    for ratio in ratios:
        target = ratio * max(t_cpu, 1e-9)
        dim, t_gpu = min(ladder, key=lambda item: abs(_log(item[1]) - _log(target)))
        chosen.append((ratio, dim, t_gpu))
    return chosen


def _log(value: float) -> float:
    import math

    return math.log(max(value, 1e-12))


# ----------------------------------------------------------------------------- a rule on a device
@dataclass
class SweepPoint:
    ratio: float  # the target T_gpu / T_cpu
    work_dim: int
    t_gpu: float  # measured seconds of GPU work per step
    timing: ABResult

    def to_json(self, t_cpu: float) -> dict[str, Any]:
        return {
            "target_ratio": self.ratio, "work_dim": self.work_dim, "t_gpu_us": round(self.t_gpu * 1e6, 3),
            "ratio": round(self.t_gpu / t_cpu, 3) if t_cpu > 0 else None, **self.timing.to_json(),
        }


def _step_function(rule: type[Rule], which: str, device: torch.device, size: int, seed: int,
                   work: list[MatmulWork]) -> tuple[Callable[[], Any], Callable[[], None]]:
    """setup once in its own namespace; returns the step (it queues the work, then runs the
    form) and what runs the pair's teardown in that namespace."""
    benchmark = rule.benchmark
    assert benchmark is not None
    namespace = new_namespace(device, size)
    seed_everything(seed)
    exec(compile_snippet(benchmark.snippet("setup"), snippet_filename(rule.code, "setup")), namespace)
    form = compile_snippet(benchmark.snippet(which), snippet_filename(rule.code, which))

    def step() -> None:
        work[0]()
        exec(form, namespace)

    return step, lambda: teardown(rule.code, benchmark, namespace)


def bench_on_device(rule: type[Rule], device: torch.device | str, *, size: int | None = None,
                    repeats: int = MIN_REPEATS, steps: int | None = None,
                    ratios: Iterable[float] = DEFAULT_RATIOS, warmup: int = 10, seed: int = 0,
                    dims: Iterable[int] = WORK_DIMS) -> dict[str, Any]:
    """Proof and timing for one rule on `device` (CUDA; on a CPU the proof is skipped)."""
    benchmark = rule.benchmark
    if benchmark is None:
        raise ValueError(f"{rule.code} has no benchmark pair")
    device = torch.device(device)
    size = benchmark.size if size is None else size
    if not benchmark.sweep:
        steps, warmup = benchmark.steps, 1
    elif steps is None:
        steps = max(benchmark.steps, MIN_STEPS)
    with _cpu_stand_in(device):
        return _bench_on_device(rule, device, size, repeats, steps, ratios, warmup, seed, dims)


def _cpu_stand_in(device: torch.device) -> Any:
    """On a CPU, run the forms under a simulating probe (uncounted) so that `torch.cuda.*`
    calls in them work on a CPU-only build; on CUDA, nothing."""
    if device.type == "cuda":
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    probe = stack.enter_context(SyncProbe(simulate=True, accelerator=device))
    stack.enter_context(probe.uncounted())
    return stack


def _bench_on_device(rule: type[Rule], device: torch.device, size: int, repeats: int, steps: int,
                     ratios: Iterable[float], warmup: int, seed: int, dims: Iterable[int]) -> dict[str, Any]:
    synchronize = synchronizer(device)
    work = [MatmulWork(device, 0)]
    bad, close_bad = _step_function(rule, "bad", device, size, seed, work)
    good, close_good = _step_function(rule, "good", device, size, seed, work)
    try:
        return _measure(rule, device, bad, good, synchronize, work, repeats, steps, ratios, warmup, size, dims)
    finally:
        close_bad()
        close_good()


def _measure(rule: type[Rule], device: torch.device, bad: Callable[[], Any], good: Callable[[], Any],
             synchronize: Callable[[], None], work: list[MatmulWork], repeats: int, steps: int,
             ratios: Iterable[float], warmup: int, size: int, dims: Iterable[int]) -> dict[str, Any]:
    for _ in range(warmup):
        bad()
        good()
    synchronize()

    result: dict[str, Any] = {"code": rule.code, "name": rule.name, "device": str(device), "size": size}
    if device.type == "cuda":
        baseline = profile_runtime_calls(lambda: None)
        profiled = {"bad": subtract(profile_runtime_calls(bad), baseline),
                    "good": subtract(profile_runtime_calls(good), baseline), "baseline": baseline}
        synchronize()
        debug = {"bad": sync_debug_proof(bad), "good": sync_debug_proof(good)}
        synchronize()
        bad_syncs = debug["bad"] == "synced" or profiled["bad"]["syncs"] > 0
        good_clean = debug["good"] == "no sync" and profiled["good"]["syncs"] == 0
        result["proof"] = {"debug_mode": debug, "profiler": profiled, "proved": bool(bad_syncs and good_clean),
                           "good_syncs_less": profiled["good"]["syncs"] < profiled["bad"]["syncs"] or
                           (debug["bad"] == "synced" and debug["good"] == "no sync")}
    else:
        result["proof"] = {"status": SKIPPED_NO_CUDA}
        result["note"] = CPU_TIMING_NOTE

    # T_cpu: host time per step of the good form with no GPU work queued.
    t_cpu = time_block(good, steps, synchronize)
    if rule.benchmark is not None and rule.benchmark.sweep:
        points = []
        for ratio, dim, t_gpu in calibrate(device, t_cpu, ratios, dims):
            work[0] = MatmulWork(device, dim)
            timing = time_ab(bad, good, synchronize, repeats=repeats, steps=steps, warmup=2)
            points.append(SweepPoint(ratio, dim, t_gpu, timing))
    else:  # an epoch per step: timed as it is, with no GPU work queued
        points = [SweepPoint(0.0, 0, 0.0, time_ab(bad, good, synchronize, repeats=repeats, steps=steps, warmup=1))]
    work[0] = MatmulWork(device, 0)
    result["t_cpu_us"] = round(t_cpu * 1e6, 3)
    result["sweep"] = [p.to_json(t_cpu) for p in points]
    headline = min(points, key=lambda p: abs(_log(p.t_gpu) - _log(t_cpu))) if points else None

    result["timing"] = headline.to_json(t_cpu) if headline else None
    return result

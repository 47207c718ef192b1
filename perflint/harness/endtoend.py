"""The end-to-end case: a training script before and after `perflint fix --unsafe-fixes`.

A case is a directory with `train.py` (as people write it) and `train_fixed.py` (the tool's
output); each defines `train(device, steps=..., seed=...) -> dict` whose values are the
per-step losses and metrics. Both run from the same seed; their results must match (close:
the fixes change summation order, e.g. `cross_entropy(..., ignore_index=)` instead of
selecting rows). Each run is counted by the sync probe. On a GPU the step time of each is
measured: `train(steps=long) - train(steps=short)` over the extra steps (which removes
model and data setup: the dataset size does not depend on `steps`), alternating
before/after, >= 7 repeats, median and IQR.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from .compare import compare_results
from .cuda import CPU_TIMING_NOTE, environment, synchronizer
from .probe import SyncProbe
from .timing import MIN_REPEATS, Stats, verdict
from .verify import seed_everything

BEFORE, AFTER = "train.py", "train_fixed.py"


def load_script(path: Path) -> ModuleType:
    """Import a script by path under a private module name (no sys.path changes)."""
    name = f"_perflint_e2e_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def _plain(value: Any) -> Any:
    """Results as JSON-friendly Python values (a fix may turn numbers into 0-dim tensors)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# On a GPU the case is timed at a size where the step has real GPU work (the defaults of
# `train()` keep the CPU run to a few seconds).
GPU_CONFIG = {"batch_size": 16, "image_size": 128, "samples": 64}


def _run_counted(module: ModuleType, device: torch.device, steps: int, seed: int,
                 config: dict[str, Any]) -> tuple[dict, int, dict]:
    seed_everything(seed)
    cudnn = torch.backends.cudnn
    previous = cudnn.deterministic, cudnn.benchmark
    cudnn.deterministic, cudnn.benchmark = True, False  # comparable losses before/after
    try:
        with SyncProbe(simulate=device.type == "cpu", accelerator=device) as probe:
            result = module.train(device, steps=steps, seed=seed, **config)
    finally:
        cudnn.deterministic, cudnn.benchmark = previous
    return result, probe.count, dict(probe.by_op())


def _time_steps(module: ModuleType, device: torch.device, short: int, long: int, seed: int,
                config: dict[str, Any]) -> float:
    import time

    synchronize = synchronizer(device)
    times = []
    for steps in (short, long):
        synchronize()
        start = time.perf_counter()
        module.train(device, steps=steps, seed=seed, **config)
        synchronize()
        times.append(time.perf_counter() - start)
    return (times[1] - times[0]) / (long - short)


def run_case(directory: Path | str, device: torch.device | str = "cpu", *, steps: int = 8, seed: int = 0,
             rtol: float = 1e-4, atol: float = 1e-6, timing: bool | None = None, repeats: int = MIN_REPEATS,
             short_steps: int = 10, long_steps: int = 60, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run before/after, compare their results, count syncs; time steps on CUDA (or when `timing`).

    `config` is passed to `train()` (default: its own defaults on a CPU, `GPU_CONFIG` on CUDA).
    """
    directory = Path(directory)
    device = torch.device(device)
    if config is None:
        config = dict(GPU_CONFIG) if device.type == "cuda" else {}
    before_module, after_module = load_script(directory / BEFORE), load_script(directory / AFTER)
    before, before_syncs, before_ops = _run_counted(before_module, device, steps, seed, config)
    after, after_syncs, after_ops = _run_counted(after_module, device, steps, seed, config)
    before, after = _plain(before), _plain(after)
    keys = sorted(set(before) | set(after))
    compared = {}
    for key in keys:
        comparison = compare_results(before.get(key), after.get(key), "close", rtol, atol)
        compared[key] = {"match": comparison.ok, "detail": comparison.detail, "max_abs_diff": comparison.max_abs_diff}
    out: dict[str, Any] = {
        "case": directory.name, "device": str(device), "steps": steps, "seed": seed, "config": config,
        "losses_before": before.get("losses"), "losses_after": after.get("losses"),
        "results_match": all(item["match"] for item in compared.values()), "compared": compared,
        "tolerance": {"rtol": rtol, "atol": atol},
        "syncs_before": before_syncs, "syncs_after": after_syncs,
        "syncs_by_op_before": before_ops, "syncs_by_op_after": after_ops,
        "same_source": (directory / BEFORE).read_text(encoding="utf-8") == (directory / AFTER).read_text(encoding="utf-8"),
    }
    if timing is None:
        timing = device.type == "cuda"
    if timing:
        env = environment(device)
        samples: dict[str, list[float]] = {"before": [], "after": []}
        _time_steps(before_module, device, 2, 4, seed, config)  # warm-up: cuDNN, allocator, lazy init
        _time_steps(after_module, device, 2, 4, seed, config)
        for repeat in range(repeats):
            order = (("before", before_module), ("after", after_module))
            for name, module in (order if repeat % 2 == 0 else order[::-1]):
                samples[name].append(_time_steps(module, device, short_steps, long_steps, seed, config))
        b, a = Stats(tuple(samples["before"])), Stats(tuple(samples["after"]))
        out["timing"] = {
            "environment": env, "before": b.to_json(), "after": a.to_json(),
            "speedup": round(b.median / a.median, 4) if a.median > 0 else None,
            "verdict": verdict(b, a), "steps_timed": long_steps - short_steps, "repeats": repeats,
        }
        if device.type != "cuda":
            out["timing"]["note"] = CPU_TIMING_NOTE
    else:
        out["timing"] = None
    return out

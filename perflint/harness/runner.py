"""A whole `perflint bench` run: every selected rule's check, and on CUDA its proof and timing.

The run is a plain dict (it is what `--output-format json` prints and what is written under
`--output-dir`); `report.py` turns it into tables and docs without importing torch.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import torch

from perflint import __version__
from perflint.registry import is_pattern_rule
from perflint.rule import Rule

from .cuda import DEFAULT_RATIOS, bench_on_device, environment
from .timing import MIN_REPEATS, MIN_STEPS
from .verify import DEFAULT_SEEDS, verify_rule

RUN_FORMAT = 1
CPU_NOTE = ("No speed is measured on a CPU. This run checks, for each rule, that the bad and good "
            "forms compute the same result on random inputs, and counts the host-device syncs each "
            "performs with the sync probe (the accelerator is simulated).")
CUDA_NOTE = ("Each rule: correctness and sync counts on the GPU, a sync proof "
             "(set_sync_debug_mode(\"error\") and profiler counts), and step times with GPU work "
             "queued before the pattern (A/B alternation, median and IQR).")


class DeviceUnavailable(Exception):
    pass


def resolve_device(choice: str) -> torch.device:
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("--device cuda: CUDA is not available in this PyTorch build or machine")
    return torch.device(choice)


def benchmarked(rules: Iterable[type[Rule]]) -> list[type[Rule]]:
    return [rule for rule in rules if rule.benchmark is not None]


def run_bench(
    rules: Sequence[type[Rule]],
    device: torch.device,
    *,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    repeats: int = MIN_REPEATS,
    steps: int | None = None,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    e2e: Path | None = None,
    timing: bool | None = None,
    size: int | None = None,
    dims: Sequence[int] | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Check (and on CUDA, prove and time) each rule; `progress` gets one line per step.

    `timing` defaults to "on CUDA only"; True on a CPU runs the timing code with the proof
    skipped (for tests of the harness: CPU timings are not a speed claim and never reach the
    summaries). `size` overrides each pair's `size` in timing, `dims` the GEMM sizes the
    work calibration may pick (both for quick runs).
    """
    if timing is None:
        timing = device.type == "cuda"
    env = environment(device)
    run: dict[str, Any] = {
        "format": RUN_FORMAT,
        "tool": f"perflint {__version__}",
        "kind": device.type,
        "environment": env,
        "date": env["date"],
        "settings": {"seeds": list(seeds), "repeats": repeats, "steps": steps or MIN_STEPS,
                     "ratios": list(ratios)},
        "note": CUDA_NOTE if device.type == "cuda" else CPU_NOTE,
        "missing": [rule.code for rule in rules if rule.benchmark is None and is_pattern_rule(rule)],
        "rules": [],
        "endtoend": None,
    }
    todo = benchmarked(rules)
    for index, rule in enumerate(todo, 1):
        started = time.perf_counter()
        progress(f"[{index}/{len(todo)}] {rule.code} {rule.name} ...")
        entry: dict[str, Any] = {"code": rule.code, "name": rule.name}
        entry["check"] = verify_rule(rule, device, tuple(seeds)).to_json()
        if timing:
            try:
                options: dict[str, Any] = {"dims": dims} if dims else {}
                if size is not None:
                    options["size"] = size
                entry["timed"] = bench_on_device(rule, device, repeats=repeats, steps=steps, ratios=ratios, **options)
            except Exception as exc:  # one failing rule must not lose the others' results
                entry["timed"] = {"error": f"{type(exc).__name__}: {exc}"}
        entry["passed"] = rule_passed(entry)
        run["rules"].append(entry)
        progress(f"[{index}/{len(todo)}] {rule.code} {'ok' if entry['passed'] else 'FAILED'}"
                 f" ({_short(entry)}, {time.perf_counter() - started:.2f}s)")
    if e2e is not None:
        from .endtoend import run_case

        progress(f"end-to-end case {e2e} ...")
        run["endtoend"] = run_case(e2e, device, repeats=repeats, timing=timing)
        progress(f"end-to-end case: results {'match' if run['endtoend']['results_match'] else 'DIFFER'}, "
                 f"syncs {run['endtoend']['syncs_before']}→{run['endtoend']['syncs_after']}")
    run["passed"] = all(entry["passed"] for entry in run["rules"]) and not run["missing"] and (
        run["endtoend"] is None or run["endtoend"]["results_match"])
    return run


def rule_passed(entry: dict[str, Any]) -> bool:
    if not entry["check"]["passed"]:
        return False
    gpu = entry.get("timed")
    if gpu is None:
        return True
    if "error" in gpu:
        return False
    proof = gpu.get("proof", {})
    if "status" in proof:  # skipped
        return True
    return entry["check"]["claim"] != "syncs" or bool(proof.get("good_syncs_less"))


def _short(entry: dict[str, Any]) -> str:
    check = entry["check"]
    text = f"syncs {max(check['syncs_bad'])}→{max(check['syncs_good'])}, results {check['results']}"
    gpu = entry.get("timed")
    if gpu and gpu.get("timing"):
        text += f", ×{gpu['timing']['speedup']:.2f} {gpu['timing']['verdict']}"
    return text

"""Measure how much `perflint trace` slows a program down (numbers for docs/trace.md).

    python scripts/trace_overhead.py [--repeats 5] [--json out.json]

Two views, for each example:

* **program time** (in-process): one worker process imports torch, runs the program once
  untraced to warm up, traces it once (the *first trace* of a process pays a one-time
  cost: the first call through a dispatch mode makes torch import `torch._dynamo`), then
  alternates untraced (`Program.run`, the same runpy path the trace uses) and traced
  (`trace_program`) runs; medians of `--repeats` runs each. This is the cost the probe adds
  to the program itself.
* **command time**: wall time of `python SCRIPT ARGS` vs `perflint trace -q SCRIPT ARGS`,
  fresh processes, medians. It includes starting Python and importing torch, which the
  trace does not slow down.

The program's own output is discarded. Both CPU time (less sensitive to other processes on
a shared machine) and wall time are recorded; quote medians with the machine they ran on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "examples/train.py (MLP, 12 steps)": ["examples/train.py"],
    "examples/segmentation/train.py (conv net, 20 steps)": ["examples/segmentation/train.py", "cpu", "20"],
    "examples/segmentation/train_fixed.py (20 steps)": ["examples/segmentation/train_fixed.py", "cpu", "20"],
}

WORKER = """
import contextlib, io, json, statistics, sys, time
import torch
from perflint.trace import Program, trace_program

argv, repeats = json.loads(sys.argv[1]), int(sys.argv[2])
program = Program(argv[0], argv[1:])
runs = {"plain": [], "traced": []}

def timed(kind, run):
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    runs[kind].append((time.perf_counter() - wall, time.process_time() - cpu))
    return result

with contextlib.redirect_stdout(io.StringIO()):
    program.run()  # warm up: imports, allocator, kernels
    wall, cpu = time.perf_counter(), time.process_time()
    trace_program(program)
    first = (time.perf_counter() - wall, time.process_time() - cpu)
    for _ in range(repeats):
        timed("plain", program.run)
        result = timed("traced", lambda: trace_program(program))
print(json.dumps({**runs, "first_traced": first, "events": result.events, "syncs": result.syncs,
                  "steps": result.total_steps}))
"""


def _medians(pairs: list) -> tuple[float, float]:
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def program_times(argv: list[str], repeats: int) -> dict:
    done = subprocess.run([sys.executable, "-c", WORKER, json.dumps(argv), str(repeats)], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    data = json.loads(done.stdout.strip().splitlines()[-1])
    (plain_wall, plain_cpu), (traced_wall, traced_cpu) = _medians(data["plain"]), _medians(data["traced"])
    return {**data, "plain_wall_s": plain_wall, "plain_cpu_s": plain_cpu, "traced_wall_s": traced_wall,
            "traced_cpu_s": traced_cpu, "slowdown_cpu": traced_cpu / plain_cpu, "slowdown_wall": traced_wall / plain_wall}


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command_times(argv: list[str], repeats: int) -> dict:
    perflint = [sys.executable, "-m", "perflint", "trace", "-q", "--exit-zero"]
    runs: dict[str, list[tuple[float, float]]] = {"python": [], "perflint trace": []}
    for _ in range(repeats):
        for name, command in (("python", [sys.executable, *argv]), ("perflint trace", [*perflint, *argv])):
            wall, cpu = time.perf_counter(), _child_cpu()
            subprocess.run(command, cwd=ROOT, capture_output=True, check=True)
            runs[name].append((time.perf_counter() - wall, _child_cpu() - cpu))
    (plain_wall, plain_cpu), (traced_wall, traced_cpu) = _medians(runs["python"]), _medians(runs["perflint trace"])
    return {"runs": runs, "python_wall_s": plain_wall, "python_cpu_s": plain_cpu, "trace_wall_s": traced_wall,
            "trace_cpu_s": traced_cpu, "slowdown_cpu": traced_cpu / plain_cpu, "slowdown_wall": traced_wall / plain_wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="also write the raw numbers here")
    options = parser.parse_args()
    import torch

    results = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}, torch {torch.__version__}",
        "repeats": options.repeats,
        "cases": {},
    }
    print(f"{results['machine']}; medians of {options.repeats} runs; CPU time (process time, all threads), "
          "wall time in parentheses")
    print("| case | syncs traced | program: untraced | traced | slowdown | first trace | "
          "command: python | perflint trace | slowdown |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, argv in CASES.items():
        program = program_times(argv, options.repeats)
        command = command_times(argv, options.repeats)
        results["cases"][name] = {"program": program, "command": command}
        print(f"| {name} | {program['syncs']} "
              f"| {program['plain_cpu_s']:.3f} s ({program['plain_wall_s']:.3f}) "
              f"| {program['traced_cpu_s']:.3f} s ({program['traced_wall_s']:.3f}) "
              f"| {program['slowdown_cpu']:.1f}× ({program['slowdown_wall']:.1f}×) "
              f"| {program['first_traced'][1]:.2f} s ({program['first_traced'][0]:.2f}) "
              f"| {command['python_cpu_s']:.2f} s ({command['python_wall_s']:.2f}) "
              f"| {command['trace_cpu_s']:.2f} s ({command['trace_wall_s']:.2f}) "
              f"| {command['slowdown_cpu']:.2f}× ({command['slowdown_wall']:.2f}×) |", flush=True)
    if options.json is not None:
        options.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()

"""The bench chart (matplotlib, an optional dependency of the `bench` extra).

From a GPU run: the speedup of the good form per rule at T_gpu ≈ T_cpu (bars, with the
range the interquartile ranges allow), and the speedup against T_gpu/T_cpu for each rule
(the sweep). From a CPU run: syncs per step of the bad and the good form per rule, with
"no timings on CPU" in the title, since a CPU measures no speed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MISSING = ("--plot needs matplotlib: pip install 'torch-perflint[bench]' (or pip install matplotlib)")


def matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot_run(run: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rules = run["rules"]
    labels = [entry["code"] for entry in rules]
    env = run["environment"]
    gpu_entries = [e for e in rules if (e.get("timed") or {}).get("timing")]
    if gpu_entries:
        fig, (bars, sweep) = plt.subplots(1, 2, figsize=(max(8, 0.7 * len(gpu_entries) + 6), 4.5))
        codes = [e["code"] for e in gpu_entries]
        speedups, low, high = [], [], []
        for entry in gpu_entries:
            timing = entry["timed"]["timing"]
            s = timing["speedup"]
            worst = timing["bad"]["q1_us"] / timing["good"]["q3_us"] if timing["good"]["q3_us"] else s
            best = timing["bad"]["q3_us"] / timing["good"]["q1_us"] if timing["good"]["q1_us"] else s
            speedups.append(s)
            low.append(max(0.0, s - worst))
            high.append(max(0.0, best - s))
        bars.bar(codes, speedups, yerr=[low, high], capsize=3, color="#4c72b0")
        bars.axhline(1.0, color="black", linewidth=0.8)
        bars.set_ylabel("step time bad / good (×)")
        bars.set_title("Speedup at T_gpu ≈ T_cpu")
        bars.tick_params(axis="x", rotation=60)
        for entry in gpu_entries:
            points = entry["timed"].get("sweep", [])
            xs = [p["ratio"] for p in points if p.get("ratio")]
            ys = [p["speedup"] for p in points if p.get("ratio")]
            if xs:
                sweep.plot(xs, ys, marker="o", label=entry["code"])
        sweep.set_xscale("log")
        sweep.axhline(1.0, color="black", linewidth=0.8)
        sweep.set_xlabel("GPU work / CPU time per step (T_gpu / T_cpu)")
        sweep.set_ylabel("speedup (×)")
        sweep.set_title("Speedup vs queued GPU work")
        sweep.legend(fontsize="x-small", ncol=2)
        where = env.get("gpu") if run["kind"] == "cuda" else "a CPU: not a speed claim, harness test only"
        fig.suptitle(f"perflint bench on {where} (torch {env['torch']}, {run['date'][:10]})")
    else:
        fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(rules) + 3), 4))
        bad = [max(e["check"]["syncs_bad"]) for e in rules]
        good = [max(e["check"]["syncs_good"]) for e in rules]
        xs = list(range(len(rules)))
        ax.bar([x - 0.2 for x in xs], bad, width=0.4, label="bad form", color="#c44e52")
        ax.bar([x + 0.2 for x in xs], good, width=0.4, label="good form", color="#55a868")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, rotation=60)
        ax.set_ylabel("host-device syncs per step")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend()
        ax.set_title(f"Sync count reduction, CPU check (simulated accelerator): no timings on CPU\n"
                     f"torch {env['torch']}, {run['date'][:10]}", fontsize="medium")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

"""Bench results as text: tables, JSON files, the per-rule summaries and the docs (no torch import).

Files under `docs/benchmarks/` (written by `perflint bench --output-dir docs/benchmarks`):

* `<kind>.json`: one whole run, as `perflint bench --output-format json` prints it;
  `cpu.json` for a CPU run, `cuda-<gpu model>.json` for a GPU run.
* `rule_summaries.json`: the latest figures per rule, merged across runs, read by
  `python -m perflint.docs` to write each rule page's "Measured" section and
  `docs/benchmarks.md`. Format (`format: 1`):

      {"format": 1,
       "rules": {"PFL201": {"name": "tensor-item", "claim": "syncs",
                            "cpu": CHECK | null,   # latest CPU run
                            "gpu": GPU | null}},   # latest CUDA run
       "endtoend": {"cpu": CASE | null, "gpu": CASE | null}}

  CHECK = {"run", "date", "torch", "device", "seeds", "syncs_bad", "syncs_good", "results",
  "max_abs_diff", "passed", "fix": {"applicability", "syncs", "results"} | null}; syncs are
  the most seen over the seeds, per step. GPU = {"run", "date", "gpu", "driver", "cuda", "torch",
  "check": CHECK, "proof": {"debug_mode": {"bad", "good"}, "profiler_syncs": {"bad", "good"},
  "proved"}, "timing": {"bad_us", "bad_iqr_us", "good_us", "good_iqr_us", "speedup",
  "verdict", "ratio", "t_cpu_us", "t_gpu_us", "repeats", "steps"}, "sweep": [{"ratio",
  "speedup", "verdict"}]} or {"run", "date", "gpu", "error"}. CASE = {"run", "date",
  "device", "steps", "results_match", "max_loss_diff", "syncs_before", "syncs_after",
  "timing": {"before_us", "after_us", "speedup", "verdict"} | null}.
  Every figure comes from a run file; nothing is typed in by hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SUMMARY_FORMAT = 1
SUMMARIES_FILE = "rule_summaries.json"
CHARTS = {"cpu": "cpu-syncs.png", "cuda": "gpu-speedups.png"}
REPRODUCE = ("perflint bench --device cpu --e2e examples/segmentation --output-dir docs/benchmarks "
             f"--plot docs/benchmarks/{CHARTS['cpu']} && python -m perflint.docs")
REPRODUCE_GPU = REPRODUCE.replace("--device cpu", "--device cuda").replace(CHARTS["cpu"], CHARTS["cuda"])


# ----------------------------------------------------------------------------- files
def run_filename(run: dict[str, Any]) -> str:
    if run["kind"] != "cuda":
        return f"{run['kind']}.json"
    gpu = run["environment"].get("gpu") or "gpu"
    return "cuda-" + re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") + ".json"


def load_summaries(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return empty_summaries()
    if not isinstance(data, dict) or data.get("format") != SUMMARY_FORMAT:
        return empty_summaries()
    data.setdefault("rules", {})
    data.setdefault("endtoend", {"cpu": None, "gpu": None})
    return data


def empty_summaries() -> dict[str, Any]:
    return {"format": SUMMARY_FORMAT, "rules": {}, "endtoend": {"cpu": None, "gpu": None}}


def write_outputs(run: dict[str, Any], directory: Path) -> list[Path]:
    """Write the run file and merge it into `rule_summaries.json`; return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    name = run_filename(run)
    run_path = directory / name
    run_path.write_text(json.dumps(run, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    summaries_path = directory / SUMMARIES_FILE
    merged = merge_summaries(load_summaries(summaries_path), run, name)
    summaries_path.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return [run_path, summaries_path]


# ----------------------------------------------------------------------------- summaries
def _check_summary(check: dict[str, Any], run: dict[str, Any], name: str) -> dict[str, Any]:
    fixed = check.get("fixed")
    return {
        "run": name, "date": run["date"], "torch": run["environment"]["torch"], "device": check["device"],
        "seeds": len(check["seeds"]), "syncs_bad": max(check["syncs_bad"]), "syncs_good": max(check["syncs_good"]),
        "results": check["results"], "max_abs_diff": check.get("max_abs_diff"), "passed": check["passed"],
        "fix": None if not fixed else {"applicability": fixed["applicability"], "syncs": max(fixed["syncs"]),
                                       "results": fixed["results"]},
    }


def _gpu_summary(entry: dict[str, Any], run: dict[str, Any], name: str) -> dict[str, Any]:
    env = run["environment"]
    out: dict[str, Any] = {"run": name, "date": run["date"], "gpu": env.get("gpu"), "driver": env.get("driver"),
                           "cuda": env.get("cuda"), "torch": env["torch"]}
    gpu = entry.get("timed") or {}
    if "error" in gpu:
        out["error"] = gpu["error"]
        return out
    out["check"] = _check_summary(entry["check"], run, name)
    proof = gpu.get("proof", {})
    out["proof"] = {
        "debug_mode": proof.get("debug_mode"),
        "profiler_syncs": {k: v["syncs"] for k, v in (proof.get("profiler") or {}).items() if k in ("bad", "good")},
        "proved": proof.get("proved"),
    }
    timing = gpu.get("timing")
    if timing:
        out["timing"] = {
            "bad_us": timing["bad"]["median_us"], "bad_iqr_us": timing["bad"]["iqr_us"],
            "good_us": timing["good"]["median_us"], "good_iqr_us": timing["good"]["iqr_us"],
            "speedup": timing["speedup"], "verdict": timing["verdict"], "ratio": timing.get("ratio"),
            "t_cpu_us": gpu.get("t_cpu_us"), "t_gpu_us": timing.get("t_gpu_us"),
            "repeats": timing["repeats"], "steps": timing["steps"],
        }
    out["sweep"] = [{"ratio": p.get("ratio"), "speedup": p["speedup"], "verdict": p["verdict"]}
                    for p in gpu.get("sweep", [])]
    return out


def _case_summary(case: dict[str, Any], run: dict[str, Any], name: str) -> dict[str, Any]:
    losses = case.get("compared", {}).get("losses", {})
    timing = case.get("timing")
    return {
        "run": name, "date": run["date"], "device": case["device"], "steps": case["steps"],
        "results_match": case["results_match"], "max_loss_diff": losses.get("max_abs_diff"),
        "syncs_before": case["syncs_before"], "syncs_after": case["syncs_after"],
        "timing": None if not timing else {
            "before_us": timing["before"]["median_us"], "after_us": timing["after"]["median_us"],
            "before_iqr_us": timing["before"]["iqr_us"], "after_iqr_us": timing["after"]["iqr_us"],
            "speedup": timing["speedup"], "verdict": timing["verdict"],
        },
    }


def merge_summaries(existing: dict[str, Any], run: dict[str, Any], name: str) -> dict[str, Any]:
    """The run's figures replace the same kind's (CPU or GPU) for the rules it covered."""
    merged = json.loads(json.dumps(existing)) if existing else empty_summaries()
    slot = "gpu" if run["kind"] == "cuda" else "cpu"
    for entry in run["rules"]:
        rule = merged["rules"].setdefault(entry["code"], {"cpu": None, "gpu": None})
        rule["name"] = entry["name"]
        rule["claim"] = entry["check"]["claim"]
        rule[slot] = _gpu_summary(entry, run, name) if slot == "gpu" else _check_summary(entry["check"], run, name)
    if run.get("endtoend"):
        case = _case_summary(run["endtoend"], run, name)
        if slot == "cpu":
            case["timing"] = None  # a CPU measures no speed
        merged["endtoend"][slot] = case
    return merged


# ----------------------------------------------------------------------------- wording
def _syncs(check: dict[str, Any]) -> str:
    return f"syncs bad→good {check['syncs_bad']}→{check['syncs_good']}"


def _results(check: dict[str, Any]) -> str:
    return {"equal": "results equal", "close": "results equal within tolerance",
            "same structure": "results of the same shape and dtype (`equal_results=False`: different draws)",
            }.get(check["results"], f"results {check['results']}")


def cpu_sentence(check: dict[str, Any], claim: str) -> str:
    text = f"CPU check: {_syncs(check)}, {_results(check)}"
    if claim == "time":
        text += " (this rule's cost is not a sync: only a GPU run measures it)"
    return text


def _day(date: str) -> str:
    return date.split("T", 1)[0]


def _g(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _us(value: float) -> str:
    return f"{value:,.1f} µs" if value < 10_000 else f"{value / 1000:,.2f} ms"


def gpu_paragraph(gpu: dict[str, Any]) -> str:
    where = (f"{gpu.get('gpu')} (driver {gpu.get('driver') or 'unknown'}, CUDA {gpu.get('cuda')}, "
             f"torch {gpu.get('torch')}), {_day(gpu['date'])}")
    if "error" in gpu:
        return f"**GPU** {where}: the run failed: {gpu['error']}"
    parts = [f"**GPU** {where}:"]
    timing = gpu.get("timing")
    if timing:
        parts.append(
            f"a step took {_us(timing['bad_us'])} with the bad form and {_us(timing['good_us'])} with the good "
            f"form (median of {timing['repeats']}×{timing['steps']} steps; IQR {_us(timing['bad_iqr_us'])} / "
            f"{_us(timing['good_iqr_us'])}): ×{timing['speedup']:.2f}, {timing['verdict']}, with GPU work "
            f"queued before the pattern at T_gpu/T_cpu = {timing['ratio']}.")
    proof = gpu.get("proof") or {}
    debug = proof.get("debug_mode") or {}
    profiler = proof.get("profiler_syncs") or {}
    if debug:
        parts.append(f"Sync proof: `set_sync_debug_mode(\"error\")` bad: {debug.get('bad')}, good: {debug.get('good')};"
                     f" profiler waits per step bad→good {profiler.get('bad')}→{profiler.get('good')}.")
    sweep = gpu.get("sweep") or []
    if sweep:
        parts.append("Speedup by T_gpu/T_cpu: " + ", ".join(f"{p['ratio']}: ×{p['speedup']:.2f}" for p in sweep) + ".")
    return " ".join(parts)


def measured_section(code: str, summaries: dict[str, Any]) -> str:
    """The "Measured" section of a rule's doc page (markdown, without the heading)."""
    entry = (summaries.get("rules") or {}).get(code)
    if not entry or not (entry.get("cpu") or entry.get("gpu")):
        return "No `perflint bench` result has been recorded for this rule yet."
    claim = entry.get("claim", "syncs")
    lines = []
    gpu, cpu = entry.get("gpu"), entry.get("cpu")
    if gpu:
        lines.append(gpu_paragraph(gpu))
        lines.append("")
    if cpu:
        sentence = cpu_sentence(cpu, claim)
        prefix = "" if gpu else "No GPU run yet; "
        lines.append(f"{prefix}{sentence} "
                     f"(torch {cpu['torch']}, {_day(cpu['date'])}, {cpu['seeds']} seeds; no speed is measured on a CPU).")
        fix = cpu.get("fix")
        if fix:
            lines.append("")
            lines.append(f"The fixer's output for the bad form ({fix['applicability']} fix): syncs {fix['syncs']}, "
                         f"{_results(fix)} to the bad form's.")
    elif not gpu:
        lines.append("No GPU run yet.")
    return "\n".join(lines).strip()


# ----------------------------------------------------------------------------- tables
def _rows(run: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    cuda = any("timed" in entry for entry in run["rules"])
    head = ["Rule", "Name", "Lint bad/good", "Syncs bad→good", "Results", "Fix output"]
    if cuda:
        step = "Step bad → good" if run["kind"] == "cuda" else "Step bad → good (CPU: not a speed claim)"
        head += ["Sync proof", step, "Speedup", "Verdict"]
    head.append("Check")
    rows = []
    for entry in run["rules"]:
        check = entry["check"]
        fixed = check.get("fixed")
        fix = "-" if not fixed else f"{fixed['applicability']}: {max(fixed['syncs'])} syncs, {fixed['results']}"
        lint = "-" if check.get("lint_bad") is None else f"{check['lint_bad']}/{check['lint_good']}"
        row = [entry["code"], entry["name"], lint, f"{max(check['syncs_bad'])}→{max(check['syncs_good'])}",
               check["results"], fix]
        if cuda:
            gpu = entry.get("timed") or {}
            proof = gpu.get("proof") or {}
            debug = proof.get("debug_mode") or {}
            timing = gpu.get("timing")
            if "error" in gpu:
                row.append("error")
            else:
                row.append(proof["status"] if "status" in proof else f"{debug.get('bad')} / {debug.get('good')}")
            row.append(f"{_us(timing['bad']['median_us'])} → {_us(timing['good']['median_us'])}" if timing else "-")
            row.append(f"×{timing['speedup']:.2f}" if timing else "-")
            row.append(timing["verdict"] if timing else "-")
        row.append("ok" if entry["passed"] else "FAILED: " + "; ".join(check["problems"] or ["GPU proof"]))
        rows.append(row)
    return head, rows


def _header_lines(run: dict[str, Any]) -> list[str]:
    env = run["environment"]
    where = env.get("gpu") or env.get("cpu") or env["kind"]
    extra = f", driver {env.get('driver')}, CUDA {env.get('cuda')}" if run["kind"] == "cuda" else ""
    return [f"perflint bench: {run['kind']} ({where}{extra}), torch {env['torch']}, {run['date']}", run["note"]]


def _endtoend_lines(run: dict[str, Any]) -> list[str]:
    case = run.get("endtoend")
    if not case:
        return []
    losses = case["compared"].get("losses", {})
    lines = [f"End-to-end ({case['case']}, {case['steps']} steps on {case['device']}): results "
             f"{'match' if case['results_match'] else 'DIFFER'} (max |loss diff| {_g(losses.get('max_abs_diff'))}), "
             f"syncs before→after {case['syncs_before']}→{case['syncs_after']}"]
    timing = case.get("timing")
    if timing:
        lines.append(f"  step time before→after {_us(timing['before']['median_us'])} → "
                     f"{_us(timing['after']['median_us'])}: ×{timing['speedup']}, {timing['verdict']}"
                     + (f" ({timing['note']})" if timing.get("note") else ""))
    return lines


def _footer(run: dict[str, Any]) -> str:
    passed = sum(1 for e in run["rules"] if e["passed"])
    text = f"{len(run['rules'])} rules checked, {passed} passed."
    if run.get("missing"):
        text += f" Without a benchmark pair: {', '.join(run['missing'])}."
    return text


def render_table(run: dict[str, Any]) -> str:
    head, rows = _rows(run)
    widths = [max(len(str(c)) for c in column) for column in zip(head, *rows)]
    lines = _header_lines(run) + [""]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    for row in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    lines += [""] + _endtoend_lines(run) + [_footer(run)]
    return "\n".join(lines) + "\n"


def _md_cell(value: str) -> str:
    return str(value).replace("|", "\\|")


def render_markdown(run: dict[str, Any]) -> str:
    head, rows = _rows(run)
    header = _header_lines(run)
    lines = [f"**{header[0]}**", "", header[1], ""]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(" --- " for _ in head) + "|")
    for row in rows:
        lines.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
    lines.append("")
    lines += [f"{line}" for line in _endtoend_lines(run)]
    lines.append(_footer(run))
    return "\n".join(lines) + "\n"


def render(run: dict[str, Any], output_format: str) -> str:
    if output_format == "json":
        return json.dumps(run, indent=1) + "\n"
    if output_format == "markdown":
        return render_markdown(run)
    return render_table(run)


# ----------------------------------------------------------------------------- docs/benchmarks.md
def benchmarks_markdown(summaries: dict[str, Any], rule_names: dict[str, str], charts: list[str]) -> str:
    """docs/benchmarks.md, generated from rule_summaries.json (see `perflint.docs`)."""
    rules = summaries.get("rules") or {}
    any_gpu = any((entry or {}).get("gpu") for entry in rules.values())
    lines = [
        "<!-- Generated by `python -m perflint.docs` from docs/benchmarks/rule_summaries.json; do not edit. -->",
        "# Benchmarks",
        "",
        "Every rule carries an executable benchmark pair: the bad form it reports and the good form it",
        "recommends (the fixer's output where it has a fix). `perflint bench` runs them. Figures on this page",
        "come only from runs recorded under `docs/benchmarks/` (the `*.json` files).",
        "",
        "* **CPU check** (every CI run can do it): on random inputs from several seeds, both forms compute the",
        "  same result, and the sync probe counts the host-device syncs each performs, simulating the",
        "  accelerator (`perflint.harness.probe`; what it can and cannot see is in `sync-catalog.md` §3).",
        "  **No speed is measured on a CPU.**",
        "* **GPU run**: the same check on CUDA tensors; a sync proof (`torch.cuda.set_sync_debug_mode(\"error\")`",
        "  must raise for the bad form and not for the good one, plus profiler counts of",
        "  `cudaStreamSynchronize`/`cudaDeviceSynchronize`/`cudaEventSynchronize`/`cudaMemcpy`/`cudaFree` for what the",
        "  debug mode misses); and step times with GPU work (a GEMM) queued before the pattern, because a",
        "  sync costs about min(T_cpu, T_gpu) per step: synchronised wall-clock loops, A/B alternation,",
        "  7 repeats of 50 steps, median and IQR, a verdict only when the IQRs do not overlap, and a sweep",
        "  of the GPU work from T_gpu/T_cpu ≈ 0.1 to 10.",
        "",
    ]
    if not any_gpu:
        lines += ["**GPU figures are pending: no GPU run has been recorded yet.** Run", "",
                  f"    {REPRODUCE_GPU}", "", "on a CUDA machine and commit the files it writes.", ""]
    for chart in charts:
        lines += [f"![{chart.rsplit('/', 1)[-1]}]({chart})", ""]
    lines += ["## Rules", "",
              "| Rule | CPU: syncs bad→good | CPU: results | GPU | Step bad → good | Speedup | Verdict"
              " | Sync proof (bad / good) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for code in sorted(rules):
        entry = rules[code] or {}
        name = rule_names.get(code, entry.get("name", ""))
        cpu, gpu = entry.get("cpu"), entry.get("gpu")
        link = f"[{code} {name}](rules/{name}.md)" if code in rule_names else f"{code} {name}"
        cpu_syncs = f"{cpu['syncs_bad']}→{cpu['syncs_good']}" if cpu else "-"
        cpu_results = cpu["results"] if cpu else "-"
        if gpu and "error" not in gpu:
            timing = gpu.get("timing") or {}
            debug = (gpu.get("proof") or {}).get("debug_mode") or {}
            gpu_cells = [
                f"{gpu.get('gpu')}, {_day(gpu['date'])}",
                f"{_us(timing['bad_us'])} → {_us(timing['good_us'])}" if timing else "-",
                f"×{timing['speedup']:.2f}" if timing else "-",
                timing.get("verdict", "-") if timing else "-",
                f"{debug.get('bad')} / {debug.get('good')}" if debug else "-",
            ]
        elif gpu:
            gpu_cells = [f"{gpu.get('gpu')}: failed", "-", "-", "-", "-"]
        else:
            gpu_cells = ["pending", "-", "-", "-", "-"]
        lines.append("| " + " | ".join(_md_cell(c) for c in [link, cpu_syncs, cpu_results, *gpu_cells]) + " |")
    cpu_dates = sorted({_day(e["cpu"]["date"]) for e in rules.values() if e and e.get("cpu")})
    if cpu_dates:
        torches = sorted({e["cpu"]["torch"] for e in rules.values() if e and e.get("cpu")})
        lines += ["", f"CPU checks: torch {', '.join(torches)}, {', '.join(cpu_dates)}."]
    lines += ["", "## End-to-end: a segmentation training loop", "",
              "`examples/segmentation/train.py` is a small semantic-segmentation training loop written the way",
              "such loops often are (boolean masks, `nonzero`, `unique`, per-step `.item()`, a DataLoader",
              "without workers); `train_fixed.py` is the same file after `perflint fix --unsafe-fixes`.", ""]
    cases = summaries.get("endtoend") or {}
    for slot in ("cpu", "gpu"):
        case = cases.get(slot)
        if not case:
            if slot == "gpu":
                lines.append("- GPU: pending (no GPU run yet).")
            continue
        steps = case["steps"]
        text = (f"- {slot.upper()} ({case['device']}, {steps} steps, {_day(case['date'])}): results "
                f"{'match' if case['results_match'] else 'DIFFER'} (max |loss difference| {_g(case['max_loss_diff'])}); "
                f"syncs before → after: {case['syncs_before']} → {case['syncs_after']} "
                f"({case['syncs_before'] / steps:g} → {case['syncs_after'] / steps:g} per step)")
        timing = case.get("timing")
        if timing and slot == "gpu":
            text += (f"; step time {_us(timing['before_us'])} → {_us(timing['after_us'])} "
                     f"(×{timing['speedup']}, {timing['verdict']})")
        lines.append(text + ".")
    lines += ["", "## Files", "",
              "- `benchmarks/cpu.json`, `benchmarks/cuda-<gpu>.json`: whole runs, as "
              "`perflint bench --output-format json` prints them (environment, settings, per-rule check,",
              "  sync events, proof and timings).",
              "- `benchmarks/rule_summaries.json`: the latest figures per rule and for the end-to-end case,",
              "  merged across runs; this page and the \"Measured\" section of each rule page are generated",
              "  from it. Its format is documented in `perflint/harness/report.py`.",
              "", "## Reproduce", "", f"    {REPRODUCE}", "",
              f"On a GPU: `{REPRODUCE_GPU}`, or `benchmarks/gpu_proof.sh`, which also traces the",
              "end-to-end case and runs on a bare machine without network (see `docs/gpu-proof.md`).", ""]
    return "\n".join(lines)

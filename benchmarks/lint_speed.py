#!/usr/bin/env python3
"""Lint speed: perflint against TorchFix on the sources of torchvision, timm and transformers.

    python benchmarks/lint_speed.py                          # all three corpora, both tools
    python benchmarks/lint_speed.py --corpora torchvision    # one corpus
    python benchmarks/lint_speed.py --no-torchfix            # perflint only (minutes -> seconds)

Run it with the interpreter perflint is installed in (`.venv/bin/python`). It downloads the
pinned wheels with `pip download --no-deps`, extracts their `.py` files into the work
directory, creates a separate virtualenv with TorchFix 0.7.0 (after checking with
`pip install --dry-run` that it would not pull torch), and runs, on the same files in the
same run:

- perflint cold (empty cache), warm (unchanged tree), touched (one file edited: the
  largest, i.e. the worst case, whose own cost is measured alone for comparison), and one
  process without cache (`-j 1 --no-cache`);
- TorchFix (`torchfix PATH`, its default rules and one job per core).

For each: wall time, CPU time, lines/s, files/s, and peak memory of the whole process tree
(the sum of the resident sizes of the command and all its children, sampled every 20 ms;
an upper bound, since forked workers share pages), plus the largest single process. It
also reports perflint's crash count (PFL001 caused by an internal error: must be 0) and its
findings per rule. A table goes to stdout, everything to `--json` (docs/performance.json).

The machine's load average is recorded before and after each measurement: other work on the
machine slows both tools, and perflint's runs are repeated (`--repeat`, best kept) because
they are short.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import zipfile
from collections import Counter
from pathlib import Path

CORPORA = {
    "torchvision": "torchvision==0.29.2",
    "timm": "timm==1.0.31",
    "transformers": "transformers==5.23.0",
}
TORCHFIX = "torchfix==0.7.0"
REPO = Path(__file__).resolve().parent.parent
TOUCH_MARK = b"\n# edited by benchmarks/lint_speed.py\n"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TORCHFIX_FINDING = re.compile(r"^\S+?:\d+:\d+: (TOR\d+)", re.M)  # path:line:col: TOR101 message


# --------------------------------------------------------------------------- preparing
def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def download(spec: str, wheels: Path) -> Path:
    name, version = spec.split("==")
    existing = sorted(wheels.glob(f"{name}-{version}-*.whl"))
    if not existing:
        wheels.mkdir(parents=True, exist_ok=True)
        log(f"pip download --no-deps {spec}")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--quiet", spec, "-d", str(wheels)], check=True)
        existing = sorted(wheels.glob(f"{name}-{version}-*.whl"))
    if not existing:
        raise SystemExit(f"no wheel for {spec} in {wheels}")
    return existing[0]


def extract_sources(wheel: Path, dest: Path) -> None:
    """The wheel's `.py` files (what both tools lint), nothing else."""
    if dest.exists():
        shutil.rmtree(dest)
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.endswith(".py") and ".dist-info/" not in member:
                archive.extract(member, dest)


def corpus_size(root: Path) -> tuple[int, int]:
    files = lines = 0
    for path in root.rglob("*.py"):
        files += 1
        lines += path.read_bytes().count(b"\n")
    return files, lines


def torchfix_venv(work: Path) -> Path:
    venv = work / "torchfix-venv"
    exe = venv / "bin" / "torchfix"
    if exe.exists():
        return exe
    log(f"creating {venv} with {TORCHFIX}")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    report = work / "torchfix-install-report.json"
    subprocess.run(pip + ["install", "--quiet", "--dry-run", "--report", str(report), TORCHFIX], check=True)
    planned = [item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]]
    if any(name == "torch" or name.startswith("nvidia-") for name in planned):
        raise SystemExit(f"{TORCHFIX} would install {planned}: refusing to pull torch")
    subprocess.run(pip + ["install", "--quiet", TORCHFIX], check=True)
    return exe


# --------------------------------------------------------------------------- measuring
def _tree_memory(root: int) -> tuple[int, int]:
    """(sum of RSS over `root` and its descendants, largest single RSS), in KiB."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        rss[pid] = int(fields[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    tree = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    sizes = [rss.get(pid, 0) for pid in tree]
    return sum(sizes), max(sizes, default=0)


def measure(command: list[str], cwd: Path, stdout: Path) -> dict:
    """Run `command`; wall and CPU time, peak memory of its process tree."""
    load_before = os.getloadavg()[0]
    before = os.times()
    start = time.perf_counter()
    with open(stdout, "wb") as out:
        process = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.PIPE)
        peak = {"tree": 0, "single": 0}
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                tree, single = _tree_memory(process.pid)
                peak["tree"] = max(peak["tree"], tree)
                peak["single"] = max(peak["single"], single)
                done.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, stderr = process.communicate()
        done.set()
        sampler.join()
    wall = time.perf_counter() - start
    after = os.times()
    return {
        "command": " ".join(command),
        "returncode": process.returncode,
        "wall_s": round(wall, 3),
        "cpu_s": round((after.children_user - before.children_user) + (after.children_system - before.children_system), 3),
        "peak_tree_rss_mb": round(peak["tree"] / 1024, 1),
        "peak_process_rss_mb": round(peak["single"] / 1024, 1),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "stderr_tail": stderr.decode(errors="replace")[-400:],
    }


def best_of(runs: list[dict]) -> dict:
    best = dict(min(runs, key=lambda r: r["wall_s"]))
    best["walls_s"] = [r["wall_s"] for r in runs]
    best["peak_tree_rss_mb"] = max(r["peak_tree_rss_mb"] for r in runs)
    best["peak_process_rss_mb"] = max(r["peak_process_rss_mb"] for r in runs)
    return best


def rates(run: dict, files: int, lines: int) -> dict:
    wall = max(run["wall_s"], 1e-9)
    return {**run, "lines_per_s": round(lines / wall), "files_per_s": round(files / wall, 1)}


# --------------------------------------------------------------------------- one corpus
def perflint_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "perflint", "check", *args]


def bench_corpus(name: str, src: Path, work: Path, torchfix: Path | None, repeat: int) -> dict:
    rel = src.relative_to(work)
    files, lines = corpus_size(src)
    cache = work / "cache" / name
    outputs = work / "out"
    outputs.mkdir(exist_ok=True)
    log(f"{name}: {files} files, {lines} lines")
    common = ["--exit-zero", "--output-format", "json"]
    result: dict = {"files": files, "lines": lines, "runs": {}}

    def json_out(tag: str) -> Path:
        return outputs / f"{name}-{tag}.json"

    cold_runs = []
    for _ in range(repeat):
        shutil.rmtree(cache, ignore_errors=True)
        cold_runs.append(measure(perflint_command(str(rel), "--cache-dir", str(cache), *common, "-o", str(json_out("cold"))),
                                 work, outputs / "stdout.txt"))
    result["runs"]["perflint_cold"] = rates(best_of(cold_runs), files, lines)
    warm_runs = [measure(perflint_command(str(rel), "--cache-dir", str(cache), *common, "-o", str(json_out("warm"))),
                         work, outputs / "stdout.txt") for _ in range(repeat)]
    result["runs"]["perflint_warm"] = rates(best_of(warm_runs), files, lines)

    # Edit the largest file (the worst case for "one file changed"), then restore it.
    largest = max(src.rglob("*.py"), key=lambda p: p.stat().st_size)
    original = largest.read_bytes()
    touched_runs = []
    try:
        for index in range(repeat):
            largest.write_bytes(original + TOUCH_MARK * (index + 1))
            touched_runs.append(measure(perflint_command(str(rel), "--cache-dir", str(cache), *common, "-o",
                                                         str(json_out("touched"))), work, outputs / "stdout.txt"))
    finally:
        largest.write_bytes(original)
    alone = [measure(perflint_command(str(largest.relative_to(work)), "--no-cache", "-j", "1", *common, "-o",
                                      str(json_out("alone"))), work, outputs / "stdout.txt") for _ in range(repeat)]
    result["runs"]["perflint_touched"] = rates(best_of(touched_runs), files, lines)
    result["touched_file"] = {"path": str(largest.relative_to(work)), "lines": original.count(b"\n"),
                              "alone_wall_s": best_of(alone)["wall_s"]}

    one = [measure(perflint_command(str(rel), "-j", "1", "--no-cache", *common, "-o", str(json_out("one"))),
                   work, outputs / "stdout.txt") for _ in range(repeat)]
    result["runs"]["perflint_one_process"] = rates(best_of(one), files, lines)

    findings = json.loads(json_out("cold").read_text())
    for tag in ("warm", "one"):
        if json.loads(json_out(tag).read_text()) != findings:
            raise SystemExit(f"{name}: perflint {tag} findings differ from the cold run's")
    crashes = [d for d in findings if d["code"] == "PFL001"
               and ("internal error" in d["message"] or "worker process" in d["message"])]
    result["perflint_findings"] = dict(sorted(Counter(d["code"] for d in findings).items()))
    result["perflint_crashes"] = len(crashes)
    result["perflint_cannot_analyze"] = [f'{d["filename"]}: {d["message"]}' for d in findings if d["code"] == "PFL001"]

    if torchfix is not None:
        log(f"{name}: TorchFix (this takes a while)")
        run = measure([str(torchfix), str(rel)], work, outputs / f"{name}-torchfix.txt")
        result["runs"]["torchfix"] = rates(run, files, lines)
        reported = ANSI.sub("", (outputs / f"{name}-torchfix.txt").read_text(errors="replace"))
        result["torchfix_findings"] = dict(sorted(Counter(TORCHFIX_FINDING.findall(reported)).items()))
        tf = result["runs"]["torchfix"]
        result["speedup_vs_torchfix"] = {  # wall time, the user's view
            tag: round(tf["wall_s"] / max(run["wall_s"], 1e-9), 1) for tag, run in result["runs"].items() if tag != "torchfix"
        }
        result["cpu_ratio_vs_torchfix"] = {  # CPU time: less sensitive to other load on the machine
            tag: round(tf["cpu_s"] / max(run["cpu_s"], 1e-9), 1) for tag, run in result["runs"].items() if tag != "torchfix"
        }
    return result


# --------------------------------------------------------------------------- reporting
def table(results: dict) -> str:
    rows = [("corpus", "run", "wall s", "cpu s", "lines/s", "files/s", "tree RSS MB", "max proc MB",
             "x TorchFix", "x cpu", "load")]
    for name, data in results["corpora"].items():
        for tag, run in data["runs"].items():
            speedup = data.get("speedup_vs_torchfix", {}).get(tag, "")
            cpu_ratio = data.get("cpu_ratio_vs_torchfix", {}).get(tag, "")
            rows.append((name, tag, f'{run["wall_s"]:.2f}', f'{run["cpu_s"]:.2f}', f'{run["lines_per_s"]:,}',
                         f'{run["files_per_s"]:,}', f'{run["peak_tree_rss_mb"]:.0f}',
                         f'{run["peak_process_rss_mb"]:.0f}', str(speedup), str(cpu_ratio),
                         f'{run["load_before"]:.1f}-{run["load_after"]:.1f}'))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(v).rjust(w) if i >= 2 else str(v).ljust(w) for i, (v, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    for name, data in results["corpora"].items():
        touched = data["touched_file"]
        lines.append(f"{name}: {data['files']} files, {data['lines']:,} lines; perflint findings "
                     f"{data['perflint_findings']}, crashes {data['perflint_crashes']}; touched "
                     f"{touched['path']} ({touched['lines']} lines) alone: {touched['alone_wall_s']:.2f} s")
        if "torchfix_findings" in data:
            lines.append(f"    TorchFix findings {data['torchfix_findings']}")
    return "\n".join(lines)


def environment() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = ""
    from perflint import __version__

    return {
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "perflint": __version__,
        "perflint_commit": commit,
        "torchfix": TORCHFIX,
        "corpora": CORPORA,
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", default=",".join(CORPORA), help="comma-separated subset of " + ", ".join(CORPORA))
    parser.add_argument("--work", type=Path, default=Path("/tmp/perflint-lint-speed"), help="work directory")
    parser.add_argument("--no-torchfix", action="store_true", help="perflint only")
    parser.add_argument("--repeat", type=int, default=3, help="perflint runs per measurement (best kept)")
    parser.add_argument("--json", type=Path, default=REPO / "docs" / "performance.json")
    args = parser.parse_args()
    names = [n.strip() for n in args.corpora.split(",") if n.strip()]
    unknown = [n for n in names if n not in CORPORA]
    if unknown:
        parser.error(f"unknown corpus {unknown[0]}")
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    torchfix = None if args.no_torchfix else torchfix_venv(work)
    results: dict = {"environment": environment(), "command": " ".join([Path(sys.executable).name, *sys.argv]),
                     "corpora": {}}
    for name in names:
        wheel = download(CORPORA[name], work / "wheels")
        src = work / "src" / name
        extract_sources(wheel, src)
        # Files written less than the cache's racy-timestamp window ago are re-hashed on the
        # next run (correctly); real trees are older, so let the fresh extraction age first.
        time.sleep(4)
        results["corpora"][name] = bench_corpus(name, src, work, torchfix, max(1, args.repeat))
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")  # keep what is done so far
    print(table(results))
    cold = [d["speedup_vs_torchfix"]["perflint_cold"] for d in results["corpora"].values() if "speedup_vs_torchfix" in d]
    if cold:
        print(f"cold speed-up over TorchFix: {min(cold)}x to {max(cold)}x (median {statistics.median(cold)}x)")
    log(f"wrote {args.json}")


if __name__ == "__main__":
    main()

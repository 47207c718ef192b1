#!/usr/bin/env python3
"""Lint speed: perflint against TorchFix and ruff on the sources of torchvision, timm and transformers.

    python benchmarks/lint_speed.py                          # all three corpora, all tools
    python benchmarks/lint_speed.py --corpora torchvision    # one corpus
    python benchmarks/lint_speed.py --no-torchfix            # perflint and ruff (minutes -> seconds)
    python benchmarks/lint_speed.py --no-torchfix --no-ruff  # perflint only

Run it with the interpreter perflint is installed in (`.venv/bin/python`; the interpreter of
a compiled install, `PERFLINT_COMPILE=1 pip install .`, times the compiled build: the JSON's
`perflint_build` says which). It downloads the
pinned wheels with `pip download --no-deps`, extracts their `.py` files into the work
directory (with an empty `pyproject.toml` marking each corpus as a project root), creates a separate virtualenv with TorchFix 0.7.0 (after checking with
`pip install --dry-run` that it would not pull torch) and one with ruff 0.17.6, and runs,
on the same files in the same run:

- perflint cold (empty cache), warm (unchanged tree), five named files after the warm run
  (`perflint check F1 .. F5` with the warm cache, the corpus's five largest files: what a
  pre-commit hook does with the staged files), touched (one file edited: the largest, i.e.
  the worst case, whose own cost is measured alone for comparison), and one process
  without cache (`-j 1 --no-cache`);
- ruff (`ruff check --no-cache --select ALL --isolated --statistics --output-format json
  PATH`: every stable rule, no configuration file, its default one thread per core),
  each run right after one of perflint's cold runs, so that both see the same load;
  `--statistics` prints one count per rule instead of every finding, so that the time is
  linting, not rendering hundreds of thousands of findings (ruff's default `full` output
  about doubles its time). Ruff exits 1 when it finds something; 2 or more is a failure;
- TorchFix (`torchfix PATH`, its default rules and one job per core).

For each: wall time, CPU time, lines/s, files/s, and peak memory of the whole process tree
(the sum of the resident sizes of the command and all its children, sampled every 20 ms;
an upper bound, since forked workers share pages), plus the largest single process. It
also reports perflint's crash count (PFL001 caused by an internal error: must be 0) and its
findings per rule (and ruff's and TorchFix's). "x TorchFix" is TorchFix's time over the run's
(the speed-up); "t/ruff" is the run's time over ruff's (perflint cold is N x ruff). The
five-file run's lines/s count the five files only, and it is left out of both ratios. A
table goes to stdout, everything to `--json` (docs/performance.json).

The machine's load average is recorded before and after each measurement: other work on the
machine slows both tools, and perflint's runs are repeated (`--repeat`, best kept) because
they are short.
"""

from __future__ import annotations

import argparse
import importlib.machinery
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
    "torchvision": "torchvision==0.29.1",
    "timm": "timm==1.0.31",
    "transformers": "transformers==5.23.0",
}
TORCHFIX = "torchfix==0.7.0"
RUFF = "ruff==0.17.6"
RUFF_ARGS = ("check", "--no-cache", "--select", "ALL", "--isolated", "--statistics", "--output-format", "json")
NAMED_FILES = 5  # files named on the command line after the warm run (a pre-commit hook)
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
    """The wheel's `.py` files (what the tools lint) and an empty `pyproject.toml`: a
    checkout has one (or `.git`) at its root, and perflint reads the whole project below it
    (also when only some files are named), not whatever project the work directory is in."""
    if dest.exists():
        shutil.rmtree(dest)
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.endswith(".py") and ".dist-info/" not in member:
                archive.extract(member, dest)
    (dest / "pyproject.toml").write_text("# the corpus's root (written by benchmarks/lint_speed.py)\n")


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


def ruff_venv(work: Path) -> Path:
    venv = work / "ruff-venv"
    exe = venv / "bin" / "ruff"
    if exe.exists() and ruff_version(exe) == RUFF.replace("==", " "):
        return exe
    log(f"creating {venv} with {RUFF}")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", RUFF], check=True)
    return exe


def ruff_version(exe: Path) -> str:
    return subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True).stdout.strip()


def largest_files(root: Path, count: int) -> list[Path]:
    """The `count` largest `.py` files below `root` (ties by path: deterministic)."""
    return sorted(root.rglob("*.py"), key=lambda p: (-p.stat().st_size, p.as_posix()))[:count]


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
def canonical(finding: dict) -> str:
    return json.dumps(finding, sort_keys=True)


def compile_perflint() -> None:
    """Write perflint's bytecode before timing it, as `pip install` does for a wheel: an
    editable install (or PYTHONDONTWRITEBYTECODE) would otherwise compile every module on
    every run, 0.13 s that no user pays."""
    code = ("import compileall, os, perflint, perflint_rules\n"
            "for package in (perflint, perflint_rules):\n"
            "    compileall.compile_dir(os.path.dirname(package.__file__), quiet=1)\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def perflint_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "perflint", "check", *args]


def bench_corpus(name: str, src: Path, work: Path, torchfix: Path | None, ruff: Path | None, repeat: int) -> dict:
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
    ruff_runs = []
    for _ in range(repeat):
        shutil.rmtree(cache, ignore_errors=True)
        cold_runs.append(measure(perflint_command(str(rel), "--cache-dir", str(cache), *common, "-o", str(json_out("cold"))),
                                 work, outputs / "stdout.txt"))
        if ruff is not None:  # right after perflint's, under the same load
            ruff_runs.append(measure([str(ruff), *RUFF_ARGS, str(rel)], work, outputs / f"{name}-ruff.json"))
            if ruff_runs[-1]["returncode"] not in (0, 1):  # 1: it found something
                raise SystemExit(f"{name}: ruff failed (exit {ruff_runs[-1]['returncode']}): "
                                 f"{ruff_runs[-1]['stderr_tail']}")
    result["runs"]["perflint_cold"] = rates(best_of(cold_runs), files, lines)
    if ruff is not None:
        result["runs"]["ruff"] = rates(best_of(ruff_runs), files, lines)
        per_rule = json.loads((outputs / f"{name}-ruff.json").read_text())  # --statistics: [{code, count, ...}]
        counts = {entry["code"] or "syntax-error": entry["count"] for entry in per_rule}
        result["ruff_findings_total"] = sum(counts.values())
        result["ruff_findings"] = dict(sorted(counts.items()))
    warm_runs = [measure(perflint_command(str(rel), "--cache-dir", str(cache), *common, "-o", str(json_out("warm"))),
                         work, outputs / "stdout.txt") for _ in range(repeat)]
    result["runs"]["perflint_warm"] = rates(best_of(warm_runs), files, lines)

    # Five files named on the command line, the cache warm: a pre-commit hook's staged files.
    named = largest_files(src, NAMED_FILES)
    named_rel = [str(p.relative_to(work)) for p in named]
    named_lines = sum(p.read_bytes().count(b"\n") for p in named)
    named_runs = [measure(perflint_command(*named_rel, "--cache-dir", str(cache), *common, "-o",
                                           str(json_out("five-files"))), work, outputs / "stdout.txt")
                  for _ in range(repeat)]
    result["runs"]["perflint_five_files"] = rates(best_of(named_runs), len(named), named_lines)

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
    # Not an error here (benchmarks/consistency.py checks it): do five files named alone
    # get the findings the whole run gives them?
    named_findings = json.loads(json_out("five-files").read_text())
    in_whole = [d for d in findings if d["filename"] in set(named_rel)]
    same = sorted(map(canonical, named_findings)) == sorted(map(canonical, in_whole))
    result["five_files"] = {"paths": named_rel, "lines": named_lines, "findings": len(named_findings),
                            "findings_in_whole_run": len(in_whole), "same_findings_as_whole_run": same}
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
            tag: round(tf["wall_s"] / max(run["wall_s"], 1e-9), 1) for tag, run in result["runs"].items()
            if tag not in ("torchfix", "perflint_five_files")
        }
        result["cpu_ratio_vs_torchfix"] = {  # CPU time: less sensitive to other load on the machine
            tag: round(tf["cpu_s"] / max(run["cpu_s"], 1e-9), 1) for tag, run in result["runs"].items()
            if tag not in ("torchfix", "perflint_five_files")
        }
    if ruff is not None:  # the other way round: perflint's time as a multiple of ruff's (>1: slower)
        rf = result["runs"]["ruff"]
        whole = [tag for tag in result["runs"] if tag.startswith("perflint_") and tag != "perflint_five_files"]
        result["wall_vs_ruff"] = {tag: round(result["runs"][tag]["wall_s"] / max(rf["wall_s"], 1e-9), 1) for tag in whole}
        result["cpu_vs_ruff"] = {tag: round(result["runs"][tag]["cpu_s"] / max(rf["cpu_s"], 1e-9), 1) for tag in whole}
    return result


# --------------------------------------------------------------------------- reporting
def table(results: dict) -> str:
    rows = [("corpus", "run", "wall s", "cpu s", "lines/s", "files/s", "tree RSS MB", "max proc MB",
             "x TorchFix", "x cpu", "t/ruff", "cpu/ruff", "load")]
    for name, data in results["corpora"].items():
        for tag, run in data["runs"].items():
            speedup = data.get("speedup_vs_torchfix", {}).get(tag, "")
            cpu_ratio = data.get("cpu_ratio_vs_torchfix", {}).get(tag, "")
            vs_ruff = data.get("wall_vs_ruff", {}).get(tag, "")
            cpu_vs_ruff = data.get("cpu_vs_ruff", {}).get(tag, "")
            rows.append((name, tag, f'{run["wall_s"]:.2f}', f'{run["cpu_s"]:.2f}', f'{run["lines_per_s"]:,}',
                         f'{run["files_per_s"]:,}', f'{run["peak_tree_rss_mb"]:.0f}',
                         f'{run["peak_process_rss_mb"]:.0f}', str(speedup), str(cpu_ratio), str(vs_ruff),
                         str(cpu_vs_ruff), f'{run["load_before"]:.1f}-{run["load_after"]:.1f}'))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(v).rjust(w) if i >= 2 else str(v).ljust(w) for i, (v, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    for name, data in results["corpora"].items():
        touched = data["touched_file"]
        lines.append(f"{name}: {data['files']} files, {data['lines']:,} lines; perflint findings "
                     f"{data['perflint_findings']}, crashes {data['perflint_crashes']}; touched "
                     f"{touched['path']} ({touched['lines']} lines) alone: {touched['alone_wall_s']:.2f} s")
        five = data["five_files"]
        lines.append(f"    five files ({five['lines']:,} lines): {five['findings']} findings, "
                     f"{five['findings_in_whole_run']} in the whole run"
                     f"{'' if five['same_findings_as_whole_run'] else ' (DIFFERENT)'}")
        if "ruff_findings" in data:
            top = sorted(data["ruff_findings"].items(), key=lambda item: -item[1])[:5]
            lines.append(f"    ruff findings {data['ruff_findings_total']:,} ({len(data['ruff_findings'])} rules; "
                         f"most: {', '.join(f'{code} {count:,}' for code, count in top)})")
        if "torchfix_findings" in data:
            lines.append(f"    TorchFix findings {data['torchfix_findings']}")
    return "\n".join(lines)


def environment(ruff: Path | None) -> dict:
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
    from perflint.facts import walker

    compiled = any(walker.__file__.endswith(suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES)
    return {
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "perflint": __version__,
        "perflint_commit": commit,
        "perflint_bytecode": "compiled before timing (as pip installs a wheel)",
        # `PERFLINT_COMPILE=1 pip install .`: the analysis core compiled with mypyc
        "perflint_build": "compiled core (mypyc)" if compiled else "pure Python",
        "torchfix": TORCHFIX,
        "ruff": ruff_version(ruff) if ruff is not None else None,
        "ruff_command": " ".join(["ruff", *RUFF_ARGS, "SRC"]),
        "corpora": CORPORA,
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", default=",".join(CORPORA), help="comma-separated subset of " + ", ".join(CORPORA))
    parser.add_argument("--work", type=Path, default=Path("/tmp/perflint-lint-speed"), help="work directory")
    parser.add_argument("--no-torchfix", action="store_true", help="no TorchFix (the slow one)")
    parser.add_argument("--no-ruff", action="store_true", help="no ruff")
    parser.add_argument("--repeat", type=int, default=3, help="perflint runs per measurement (best kept)")
    parser.add_argument("--json", type=Path, default=REPO / "docs" / "performance.json")
    args = parser.parse_args()
    names = [n.strip() for n in args.corpora.split(",") if n.strip()]
    unknown = [n for n in names if n not in CORPORA]
    if unknown:
        parser.error(f"unknown corpus {unknown[0]}")
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    compile_perflint()
    torchfix = None if args.no_torchfix else torchfix_venv(work)
    ruff = None if args.no_ruff else ruff_venv(work)
    results: dict = {"environment": environment(ruff), "command": " ".join([Path(sys.executable).name, *sys.argv]),
                     "corpora": {}}
    for name in names:
        wheel = download(CORPORA[name], work / "wheels")
        src = work / "src" / name
        extract_sources(wheel, src)
        # Files written less than the cache's racy-timestamp window ago are re-hashed on the
        # next run (correctly); real trees are older, so let the fresh extraction age first.
        time.sleep(4)
        results["corpora"][name] = bench_corpus(name, src, work, torchfix, ruff, max(1, args.repeat))
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")  # keep what is done so far
    print(table(results))
    cold = [d["speedup_vs_torchfix"]["perflint_cold"] for d in results["corpora"].values() if "speedup_vs_torchfix" in d]
    if cold:
        print(f"cold speed-up over TorchFix: {min(cold)}x to {max(cold)}x (median {statistics.median(cold)}x)")
    vs_ruff = [d["wall_vs_ruff"]["perflint_cold"] for d in results["corpora"].values() if "wall_vs_ruff" in d]
    if vs_ruff:
        print(f"perflint cold takes {min(vs_ruff)}x to {max(vs_ruff)}x ruff's time "
              f"(median {statistics.median(vs_ruff)}x; ruff --select ALL)")
    log(f"wrote {args.json}")


if __name__ == "__main__":
    main()

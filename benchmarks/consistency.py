#!/usr/bin/env python3
"""Consistency: does a file checked alone get the findings the whole-project run gives it?

    python benchmarks/consistency.py                                # pyro-ppl, lightning-bolts, allennlp
    python benchmarks/consistency.py --projects pyro-ppl --sample 200
    python benchmarks/consistency.py --projects somepkg==1.2.3 --json /tmp/consistency.json

Run it with the interpreter perflint is installed in. For each project it downloads the
pinned release with `pip download --no-deps` (the wheel; the sdist when there is no wheel),
extracts its `.py` files into the work directory with an empty `pyproject.toml` at the top
(what marks a checkout's root, so that perflint takes that directory as the project), and,
from the project's directory:

1. runs `perflint check --output-format json --no-cache .` once: the whole project, as a
   user checking everything sees it;
2. checks every file F alone, in this process, with the library API
   (`perflint.api.check_paths([F], SettingsResolver(cwd), jobs=1, cache=None)`: what
   `perflint check F` does, e.g. in a pre-commit hook that passes only the staged files),
   or a seeded sample of `--sample N` files. When a file named alone is analyzed with the
   rest of its project, each of these runs reads the whole project: `--cache` shares one
   fresh perflint cache between them (faster, but then the cache is under test too);
3. compares, per file, the set of (code, row, column, message) of its findings in the two
   runs, the message without any "reached from ..." chain (which may name files the
   alone-run cannot see) and paths normalised.

As a check on the harness, the whole project is also checked once in this process with the
same API; `api_whole_matches_cli` says whether that agrees with the command line.

It prints, per project, the number of files, the whole run's findings, the files whose
alone-run differs and the findings lost (found only in the whole run) and gained (found
only alone), and the first few differences; `--json` writes everything. The exit status
is 1 when any file differs, 2 when the harness itself fails.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import random
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

PROJECTS = {
    "pyro-ppl": "pyro-ppl==1.9.1",
    "lightning-bolts": "lightning-bolts==0.7.0",
    "allennlp": "allennlp==2.10.1",
}
REPO = Path(__file__).resolve().parent.parent
ROOT_MARKER = "# the project's root (written by benchmarks/consistency.py; no [tool.perflint])\n"
# "... every step (reached from `train` in train.py)" and the like: the chain of callers that
# made a function hot may name other files, so it is not part of what is compared.
CHAIN = re.compile(r"[\s;,:(\[\u2014-]*\breached from\b.*\Z", re.S | re.I)

Key = tuple  # (code, row, column, message)


# --------------------------------------------------------------------------- preparing
def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _archives(directory: Path, name: str, version: str) -> list[Path]:
    stems = {name, name.replace("-", "_"), name.replace("_", "-"), re.sub(r"[-_.]+", "_", name).lower()}
    found = []
    for stem in sorted(stems):
        found += directory.glob(f"{stem}-{version}-*.whl")
        found += directory.glob(f"{stem}-{version}.tar.gz")
        found += directory.glob(f"{stem}-{version}.zip")
    return sorted(set(found), key=lambda p: (not p.name.endswith(".whl"), p.name))


def download(spec: str, directory: Path) -> Path:
    """The release's wheel (or, when it has none, its sdist) in `directory`."""
    name, version = spec.split("==")
    existing = _archives(directory, name, version)
    if existing:
        return existing[0]
    directory.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(directory)]
    log(f"pip download --no-deps {spec}")
    if subprocess.run(pip + ["--only-binary=:all:", spec]).returncode != 0:
        log(f"no wheel for {spec}: trying the sdist")
        subprocess.run(pip + ["--no-binary=:all:", spec], check=True)
    existing = _archives(directory, name, version)
    if not existing:
        log(f"no wheel or sdist for {spec} in {directory}")
        raise SystemExit(2)
    return existing[0]


def _safe_member(name: str) -> str | None:
    """The member's path when it is a `.py` file that stays below the destination."""
    parts = Path(name).parts
    if not name.endswith(".py") or Path(name).is_absolute() or ".." in parts:
        return None
    return name


def extract_sources(archive: Path, dest: Path) -> None:
    """The archive's `.py` files (no metadata; an sdist's top directory dropped) and an empty
    `pyproject.toml`: a checkout has one (or `.git`) at its root, and perflint reads the
    whole project below it, whatever files are named."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    (dest / "pyproject.toml").write_text(ROOT_MARKER)
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as zipped:
            for member in zipped.namelist():
                if _safe_member(member) and ".dist-info/" not in member:
                    zipped.extract(member, dest)
        return
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zipped:
            members = [(m, m.split("/", 1)[-1]) for m in zipped.namelist()]
            for member, inner in members:
                if "/" in member and _safe_member(inner):
                    target = dest / inner
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zipped.read(member))
        return
    with tarfile.open(archive) as tarred:
        for member in tarred.getmembers():
            inner = member.name.split("/", 1)[-1] if "/" in member.name else ""
            if member.isfile() and _safe_member(inner):
                target = dest / inner
                target.parent.mkdir(parents=True, exist_ok=True)
                handle = tarred.extractfile(member)
                if handle is not None:
                    target.write_bytes(handle.read())


# --------------------------------------------------------------------------- comparing
def normalise_path(name: str, root: Path | None = None) -> str:
    """A finding's file as a POSIX path relative to the project (`./a//b.py` -> `a/b.py`)."""
    if root is not None and os.path.isabs(name):
        try:
            name = os.path.relpath(name, root)
        except ValueError:
            pass
    name = posixpath.normpath(name.replace(os.sep, "/"))
    return name[2:] if name.startswith("./") else name


def strip_chain(message: str) -> str:
    """The message without a trailing "reached from ..." chain of callers."""
    return CHAIN.sub("", message)


def finding_key(finding: dict) -> Key:
    """What is compared of one finding (perflint's JSON format)."""
    location = finding["location"]
    return (finding["code"], location["row"], location["column"], strip_chain(finding["message"]))


def by_file(findings: list[dict], root: Path | None = None) -> dict[str, set[Key]]:
    files: dict[str, set[Key]] = {}
    for finding in findings:
        files.setdefault(normalise_path(finding["filename"], root), set()).add(finding_key(finding))
    return files


def compare(whole: set[Key], alone: set[Key]) -> tuple[list[Key], list[Key]]:
    """(lost: only in the whole run, gained: only alone), each sorted."""
    return sorted(whole - alone), sorted(alone - whole)


def describe(key: Key) -> str:
    code, row, column, message = key
    return f"{code} {row}:{column} {message}"


def sample_files(files: list[str], sample: int, seed: int) -> list[str]:
    """All `files` (sorted) or, with `sample` > 0, that many of them picked with `seed`."""
    ordered = sorted(files)
    if sample <= 0 or sample >= len(ordered):
        return ordered
    return sorted(random.Random(seed).sample(ordered, sample))


# --------------------------------------------------------------------------- one project
def whole_run(project: Path, out: Path) -> tuple[list[dict], float]:
    command = [sys.executable, "-m", "perflint", "check", "--output-format", "json", "--no-cache",
               "--exit-zero", "-o", str(out), "."]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=project, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0 or not out.exists():
        log(f"{' '.join(command)} failed (exit {done.returncode}): {done.stderr[-2000:]}")
        raise SystemExit(2)
    return json.loads(out.read_text()), seconds


def check_project(label: str, project: Path, out: Path, sample: int, seed: int,
                  cache_dir: Path | None = None) -> dict:
    from perflint.api import check_paths, iter_targets
    from perflint.cache import Cache
    from perflint.config import SettingsResolver

    log(f"{label}: whole project (perflint check --no-cache .)")
    whole_findings, whole_s = whole_run(project, out)
    whole = by_file(whole_findings, project)
    previous = Path.cwd()
    os.chdir(project)
    try:
        resolver = SettingsResolver(Path.cwd())
        targets, _missing = iter_targets([Path(".")], resolver)
        files = [normalise_path(str(t.path), project) for t in targets]
        start = time.perf_counter()
        api_whole = check_paths([Path(".")], resolver, jobs=1, cache=None)
        api_whole_s = time.perf_counter() - start
        api_matches = by_file([d.to_json() for d in api_whole.diagnostics], project) == whole
        chosen = sample_files(files, sample, seed)
        cache = None
        if cache_dir is not None:
            shutil.rmtree(cache_dir, ignore_errors=True)
            cache = Cache.open(cache_dir)
        log(f"{label}: {len(files)} files; checking {len(chosen)} alone" + (" (with a cache)" if cache else ""))
        differences = []
        start = reported = time.perf_counter()
        for count, name in enumerate(chosen, 1):
            expected = whole.get(name, set())
            error = None
            try:
                report = check_paths([Path(name)], resolver, jobs=1, cache=cache)
                alone = by_file([d.to_json() for d in report.diagnostics], project)
                got = set().union(*alone.values()) if alone else set()
                strays = sorted(set(alone) - {name})
                if strays:
                    error = f"findings for other files: {strays[:3]}"
            except Exception as exc:  # a crash is a difference, not the end of the run
                got, error = set(), f"{type(exc).__name__}: {exc}"
            lost, gained = compare(expected, got)
            if lost or gained or error:
                differences.append({"path": name, "whole": len(expected), "alone": len(got),
                                    "lost": [list(k) for k in lost], "gained": [list(k) for k in gained],
                                    **({"error": error} if error else {})})
            now = time.perf_counter()
            if count % 100 == 0 or now - reported > 60:
                reported = now
                left = (now - start) / count * (len(chosen) - count)
                log(f"{label}: {count}/{len(chosen)} files, {len(differences)} differ; about {left:.0f} s left")
        alone_s = time.perf_counter() - start
    finally:
        os.chdir(previous)
    in_chosen = sum(len(whole.get(name, ())) for name in chosen)
    return {
        "files": len(files),
        "checked_alone": len(chosen),
        "sample": sample or None,
        "cache": cache_dir is not None,
        "seed": seed if sample else None,
        "findings_whole": len(whole_findings),
        "findings_whole_in_checked_files": in_chosen,
        "files_with_findings_whole": sum(1 for name in chosen if whole.get(name)),
        "files_differ": len(differences),
        "findings_lost_alone": sum(len(d["lost"]) for d in differences),
        "findings_gained_alone": sum(len(d["gained"]) for d in differences),
        "errors": sum(1 for d in differences if "error" in d),
        "api_whole_matches_cli": api_matches,
        "seconds": {"whole_cli": round(whole_s, 2), "whole_api": round(api_whole_s, 2),
                    "alone_total": round(alone_s, 2)},
        "differences": differences,
    }


# --------------------------------------------------------------------------- reporting
def summary(label: str, data: dict, show: int) -> str:
    checked = f"{data['checked_alone']} checked alone" + (f", seed {data['seed']}" if data["sample"] else "") \
        + (", with a cache" if data.get("cache") else "")
    lines = [
        f"{label}: {data['files']} files ({checked}); whole run {data['findings_whole']} findings "
        f"({data['findings_whole_in_checked_files']} in the checked files)",
        f"    alone-run differs for {data['files_differ']} files: {data['findings_lost_alone']} findings lost, "
        f"{data['findings_gained_alone']} gained, {data['errors']} errors; API whole run "
        f"{'matches' if data['api_whole_matches_cli'] else 'DIFFERS FROM'} the CLI's; "
        f"{data['seconds']['alone_total']:.1f} s alone, {data['seconds']['whole_cli']:.1f} s whole",
    ]
    for difference in data["differences"][:show]:
        lines.append(f"    {difference['path']}: {difference['whole']} whole, {difference['alone']} alone"
                     + (f" ({difference['error']})" if "error" in difference else ""))
        for key in difference["lost"][:3]:
            lines.append(f"      - {describe(tuple(key))}")
        for key in difference["gained"][:3]:
            lines.append(f"      + {describe(tuple(key))}")
        more = len(difference["lost"]) + len(difference["gained"]) - min(3, len(difference["lost"])) \
            - min(3, len(difference["gained"]))
        if more > 0:
            lines.append(f"      ... {more} more")
    if len(data["differences"]) > show:
        lines.append(f"    ... {len(data['differences']) - show} more files differ")
    return "\n".join(lines)


def environment(specs: dict[str, str]) -> dict:
    import perflint

    here = Path(perflint.__file__).resolve().parent

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()
        except OSError:
            return ""

    return {
        "python": sys.version.split()[0],
        "perflint": perflint.__version__,
        "perflint_path": str(here),
        "perflint_is_this_repo": here == REPO / "perflint",  # else: the commit below is not what ran
        "repo_commit": git("rev-parse", "--short", "HEAD"),
        "repo_dirty": bool(git("status", "--porcelain", "--", "perflint", "rules")),
        "projects": specs,
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", default=",".join(PROJECTS),
                        help="comma-separated: " + ", ".join(PROJECTS) + ", or NAME==VERSION")
    parser.add_argument("--work", type=Path, default=Path("/tmp/perflint-consistency"), help="work directory")
    parser.add_argument("--sample", type=int, default=0, help="check N files alone per project (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="for --sample")
    parser.add_argument("--cache", action="store_true",
                        help="share one fresh perflint cache between the alone runs (faster; tests the cache too)")
    parser.add_argument("--show", type=int, default=5, help="differences printed per project")
    parser.add_argument("--json", type=Path, help="write everything here")
    args = parser.parse_args()
    specs: dict[str, str] = {}
    for item in (p.strip() for p in args.projects.split(",")):
        if not item:
            continue
        if "==" in item:
            specs[item.split("==")[0]] = item
        elif item in PROJECTS:
            specs[item] = PROJECTS[item]
        else:
            parser.error(f"unknown project {item} (give NAME==VERSION)")
    work = args.work.resolve()
    (work / "out").mkdir(parents=True, exist_ok=True)
    results: dict = {"environment": environment(specs), "command": " ".join([Path(sys.executable).name, *sys.argv]),
                     "projects": {}}
    for label, spec in specs.items():
        try:
            archive = download(spec, work / "downloads")
        except subprocess.CalledProcessError as exc:
            log(f"{spec}: {exc}")
            return 2
        project = work / "src" / label
        extract_sources(archive, project)
        results["projects"][label] = check_project(label, project, work / "out" / f"{label}-whole.json",
                                                   args.sample, args.seed,
                                                   work / "cache" / label if args.cache else None)
        print(summary(spec, results["projects"][label], args.show), flush=True)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(results, indent=2) + "\n")  # keep what is done so far
    if args.json:
        log(f"wrote {args.json}")
    differ = sum(p["files_differ"] for p in results["projects"].values())
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

"""Run `perflint fix --unsafe-fixes` over real code and check that it lost nothing.

    python scripts/fix_corpus.py [PACKAGE ...] [--corpora DIR] [--keep DIR]

For each package (default: torchvision timm transformers) the sources are taken from
`DIR/<package>/<package>` (sources unpacked from the wheel), or from a wheel in DIR, or
downloaded with `pip download --no-deps`, and copied to a temporary directory. Then:

1. `perflint fix --unsafe-fixes` runs on the copy (the real CLI, in a subprocess);
2. every changed file must still decode the way it did, parse, and compile (when the
   original compiled);
3. nothing but the fixed spans may change: the fixer's rounds are replayed through the API,
   which must give the same bytes, and putting the original text back into every edited
   span must give back the original file exactly;
4. a second `perflint fix --unsafe-fixes --diff` must find nothing more to do.

Prints the counts (files, files changed, fixes applied per rule, dropped fixes, failures)
and exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perflint import api  # noqa: E402
from perflint.config import SettingsResolver  # noqa: E402
from perflint.fixes import compiles  # noqa: E402
from perflint.runner import lint_project  # noqa: E402
from perflint.source import DecodeFailure, SourceFile  # noqa: E402

DEFAULT_PACKAGES = ("torchvision", "timm", "transformers")


@dataclass
class Result:
    package: str
    files: int = 0
    changed: list[str] = field(default_factory=list)
    fixes: collections.Counter = field(default_factory=collections.Counter)
    dropped: collections.Counter = field(default_factory=collections.Counter)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> dict:
        return {
            "package": self.package,
            "files": self.files,
            "files_changed": len(self.changed),
            "fixes_applied": sum(self.fixes.values()),
            "fixes_per_rule": dict(sorted(self.fixes.items())),
            "fixes_dropped": dict(sorted(self.dropped.items())),
            "failures": self.failures,
            "seconds_fix": round(self.seconds, 1),
        }


# --------------------------------------------------------------------------- sources
def find_sources(package: str, corpora: Path, scratch: Path) -> Path:
    """A directory holding the package's `.py` files."""
    unpacked = corpora / package / package
    if unpacked.is_dir():
        return unpacked
    wheels = sorted(corpora.glob(f"{package}-*.whl"))
    if not wheels:
        download = scratch / "wheels"
        download.mkdir(exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(download),
                        package], check=True)
        wheels = sorted(download.glob(f"{package}-*.whl"))
        if not wheels:
            raise SystemExit(f"pip download gave no wheel for {package}")
    target = scratch / "unpacked" / package
    with zipfile.ZipFile(wheels[-1]) as wheel:
        for name in wheel.namelist():
            if name.startswith(f"{package}/") and name.endswith(".py"):
                wheel.extract(name, target)
    return target / package


def copy_sources(source: Path, destination: Path) -> list[Path]:
    files = []
    for path in sorted(source.rglob("*.py")):
        if path.is_symlink() or not path.is_file():
            continue
        target = destination / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        files.append(target)
    return files


# --------------------------------------------------------------------------- checks
def perflint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perflint", *args], cwd=cwd, capture_output=True, text=True)


def _original_position(spans: list[tuple[int, int, int, int]], position: int) -> int:
    """Where a position of the current text was in the original text (a position in or at
    the edge of an edited span maps to that span's start: the edit merges with it)."""
    delta = 0
    for start, end, o_start, o_end in spans:
        if start <= position <= end:
            return o_start
        if end < position:
            delta += (end - start) - (o_end - o_start)
    return position - delta


def track_spans(spans: list[tuple[int, int, int, int]], edits: list[tuple[int, int, str]]
                ) -> list[tuple[int, int, int, int]]:
    """The edited spans after one round of edits: (start, end) in the new text, each with
    the (start, end) of the original text it stands for. Touching spans merge."""
    items = [(s, e, os, oe, 0) for s, e, os, oe in spans]
    for start, end, content in edits:
        o_start, o_end = _original_position(spans, start), _original_position(spans, end)
        items.append((start, end, o_start, max(o_start, o_end), len(content) - (end - start)))
    items.sort(key=lambda item: (item[0], item[1]))
    merged: list[list[int]] = []
    for start, end, o_start, o_end, delta in items:
        if merged and start <= merged[-1][1]:
            last = merged[-1]
            last[1], last[2], last[3], last[4] = max(last[1], end), min(last[2], o_start), max(last[3], o_end), last[4] + delta
        else:
            merged.append([start, end, o_start, o_end, delta])
    out, shift = [], 0
    for start, end, o_start, o_end, delta in merged:
        out.append((start + shift, end + shift + delta, o_start, o_end))
        shift += delta
    return out


def only_fixed_spans_changed(original: str, rounds: list[tuple[str, list[tuple[int, int, str]]]],
                             final: str) -> str | None:
    """None when putting the original text back into every edited span gives the original
    file exactly; else what went wrong."""
    spans: list[tuple[int, int, int, int]] = []
    text = original
    for before, edits in rounds:
        if before != text:
            return "the fixer's rounds do not chain"
        edits = sorted(edits, key=lambda e: (e[0], e[1]))
        spans = track_spans(spans, edits)
        pieces, position = [], 0
        for start, end, content in edits:
            pieces += [text[position:start], content]
            position = end
        text = "".join(pieces) + text[position:]
    if text != final:
        return "replaying the fixer's rounds does not give the fixed text"
    rebuilt, position = [], 0
    for start, end, o_start, o_end in spans:
        rebuilt += [final[position:start], original[o_start:o_end]]
        position = end
    if "".join(rebuilt) + final[position:] != original:
        return "text outside the fixed spans changed"
    return None


def project_hot_functions(work: Path, resolver: SettingsResolver) -> dict[Path, frozenset[str]]:
    """Per file, the functions other files call every step, found by the same project pass
    the CLI runs: replaying a file's fix without them would miss the fixes they enable."""
    targets, _ = api.iter_targets([work], resolver)
    lint = lambda target, display, raw, hot: api.lint_target(target, work, raw, hot)  # noqa: E731
    hot = lint_project(targets, work, lint, jobs=1, cache=None).hot
    return {targets[i].path.resolve(): names for i, names in hot.items()}


def check_package(package: str, corpora: Path, scratch: Path) -> Result:
    result = Result(package)
    work = scratch / "work" / package
    files = copy_sources(find_sources(package, corpora, scratch), work / package)
    originals = {path: path.read_bytes() for path in files}
    result.files = len(files)

    started = time.perf_counter()
    first = perflint("fix", "--unsafe-fixes", "--no-respect-gitignore", "-q", ".", cwd=work)
    result.seconds = time.perf_counter() - started
    if first.returncode not in (0, 1):
        result.failures.append(f"perflint fix exited {first.returncode}: {first.stderr.strip()[:500]}")
    for line in first.stderr.splitlines():
        if "dropped the" in line:
            result.dropped[line.split("dropped the ", 1)[1].split(" ", 1)[0]] += 1
        elif line.startswith("perflint: warning:"):
            result.failures.append(line)

    resolver = SettingsResolver(work)
    seeds = project_hot_functions(work, resolver)
    for path in files:
        after = path.read_bytes()
        before = originals[path]
        if after == before:
            continue
        name = str(path.relative_to(work))
        result.changed.append(name)
        try:
            source = SourceFile.from_bytes(name, before)
            fixed = SourceFile.from_bytes(name, after)
        except DecodeFailure as exc:
            result.failures.append(f"{name}: no longer decodes: {exc}")
            continue
        if (fixed.encoding, fixed.bom, fixed.newline()) != (source.encoding, source.bom, source.newline()):
            result.failures.append(f"{name}: encoding, BOM or line endings changed")
        if compiles(source.text, name) and not compiles(fixed.text, name):
            result.failures.append(f"{name}: no longer compiles")
        outcome = api.fix_file_source(source, resolver.for_path(path), path, unsafe=True,
                                      hot_functions=seeds.get(path.resolve(), frozenset()))
        if source.to_bytes(outcome.text) != after:
            result.failures.append(f"{name}: the API and the CLI disagree")
            continue
        problem = only_fixed_spans_changed(source.text, outcome.rounds, outcome.text)
        if problem:
            result.failures.append(f"{name}: {problem}")
        result.fixes.update(d.code for d in outcome.fixed)

    second = perflint("fix", "--unsafe-fixes", "--no-respect-gitignore", "--diff", "-q", ".", cwd=work)
    if second.returncode != 0:
        touched = [line[4:] for line in second.stdout.splitlines() if line.startswith("+++ ")]
        result.failures.append(f"a second run would change {len(touched)} file(s): {touched[:10]}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("packages", nargs="*", default=list(DEFAULT_PACKAGES))
    parser.add_argument("--corpora", type=Path, default=Path("/tmp/corpora"),
                        help="where unpacked sources or wheels are (default: /tmp/corpora)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the fixed copies in this directory")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="perflint-corpus-"))
    results = []
    try:
        for package in args.packages:
            results.append(check_package(package, args.corpora, scratch))
        if args.keep is not None:
            shutil.copytree(scratch / "work", args.keep, dirs_exist_ok=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    if args.json:
        print(json.dumps([r.summary() for r in results], indent=2))
    else:
        for r in results:
            s = r.summary()
            print(f"{r.package}: {s['files']} files, {s['files_changed']} changed, {s['fixes_applied']} fixes "
                  f"applied in {s['seconds_fix']} s; per rule {s['fixes_per_rule']}; dropped {s['fixes_dropped']}; "
                  f"{len(r.failures)} failure(s)")
            for failure in r.failures:
                print(f"  FAIL {failure}")
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The project snapshot: the last whole-project result, so that re-running an unchanged tree
costs discovery and one `stat` per file.

A run ends with the project pass, a fixpoint over every file's result (`perflint.runner`).
From the per-file cache alone a warm run would redo it: read the entry of every file with
findings or facts for other files (transformers: 2,500 of 3,200) and iterate the pass again,
to get what the last run got. The snapshot keeps that last answer instead: every file's final
result (chains across files completed) and seeds, one file per working directory and tree,
under a signature of every file's entry key (perflint's code, settings, rules, displayed
path and content hash; see `perflint.cache`). It is used only when the signature of the
files found now is the same, which needs every file unchanged by a trusted stat; any
difference (a file edited, added or removed, another setting) falls back to the full pass,
which writes a new snapshot. It keeps only what is reported (findings, errors) and the
seeds (`perflint fix` lints a file again with them); the facts each file gave the pass stay
in the per-file entries. Like cache entries, it is JSON (never code) and replaced
atomically; an unreadable or foreign one is ignored, and one unused for 30 days is pruned
with the entries.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

from .cache import Cache, cacheable, keep_alive
from .engine import FileResult
from .fileio import replace_file
from .files import Target
from .types import Diagnostic

_FORMAT = 1


def signature(cache: Cache, targets: Sequence[Target], displays: Sequence[str]) -> str | None:
    """What the results of these targets depend on, or None when a file is not known
    unchanged (never hashed, edited, or hashed too soon after it was written)."""
    digest = hashlib.blake2b(digest_size=16)
    keyed = []
    for target, display in zip(targets, displays):
        key = cache.unchanged_key(target, display)
        if key is None:
            return None
        keyed.append(f"{os.path.abspath(target.path)}\0{key}\n")
    for line in sorted(keyed):  # the same files named in another order: the same project
        digest.update(line.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def load(cache: Cache, targets: Sequence[Target], displays: Sequence[str]
         ) -> tuple[list[FileResult], dict[int, frozenset[str]]] | None:
    """(every target's reported result, the seeds per target index) from the snapshot,
    when it describes exactly these files as they are now; else None."""
    if not targets:
        return None
    path = _path(cache, targets)
    try:
        with open(path, "rb") as handle:
            raw, mtime = handle.read(), os.fstat(handle.fileno()).st_mtime
        data = json.loads(raw)
    except (OSError, ValueError):
        return None
    try:
        if data["format"] != _FORMAT or data["signature"] != signature(cache, targets, displays):
            return None
        files = data["files"]
        results: list[FileResult] = []
        hot: dict[int, frozenset[str]] = {}
        for i, (target, display) in enumerate(zip(targets, displays)):
            stored = files.get(os.path.abspath(target.path))
            if stored is None:  # parsed, nothing to report, no seeds
                results.append(FileResult(display, parsed=True))
                continue
            error, parsed, diagnostics, seeds = stored
            results.append(FileResult(display, [Diagnostic.from_json(d) for d in diagnostics], error=error,
                                      parsed=bool(parsed)))
            if seeds:
                hot[i] = frozenset(seeds)
    except Exception:  # corrupt, foreign, another format: run the project pass
        return None
    keep_alive(path, mtime)
    return results, hot


def store(cache: Cache, targets: Sequence[Target], displays: Sequence[str], results: Sequence[FileResult],
          hot: dict[int, frozenset[str]]) -> None:
    """Keep what this run reports (not the facts the project pass needed) for the next run
    over the same, unchanged files."""
    if not targets or not all(cacheable(result) for result in results):
        return
    current = signature(cache, targets, displays)
    if current is None:
        return
    files = {}
    for i, (target, result) in enumerate(zip(targets, results)):
        seeds = sorted(hot.get(i, ()))
        if result.diagnostics or result.error is not None or not result.parsed or seeds:
            files[os.path.abspath(target.path)] = [
                result.error, result.parsed, [d.to_json() for d in result.diagnostics], seeds]
    data = json.dumps({"format": _FORMAT, "signature": current, "files": files}, separators=(",", ":"))
    path = _path(cache, targets)
    try:
        path.parent.mkdir(exist_ok=True)
        replace_file(path, data.encode("utf-8", "surrogatepass"), suffix=".tmp")
    except OSError:
        return  # a full disk or a read-only cache costs speed, never results


def _path(cache: Cache, targets: Sequence[Target]) -> Path:
    """One snapshot per working directory (displayed paths depend on it) and tree."""
    tree = os.path.commonpath([os.path.abspath(t.path) for t in targets])
    name = hashlib.blake2b(f"{os.getcwd()}\0{tree}".encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return cache.projects / f"{name}.json"

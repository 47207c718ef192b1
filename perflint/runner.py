"""Running per-file work over many targets: the cache first, then a pool for the rest.

The parent stats every target and serves unchanged files from the cache; the others are
handed to forked workers, largest first, and the outcomes come back in target order, one
at a time (no source or tree is ever held for more than the file being worked on).
"""

from __future__ import annotations

import contextlib
import gc
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from . import snapshot
from .cache import Cache, Record
from .engine import FileResult, linter_for
from .facts.project_calls import IMPORTED
from .facts.summaries import join_summaries
from .files import Target
from .hot_paths import attach_hot_paths
from .parallel import effective_jobs, ordered_map
from .project import ClassTree, ProjectIndex, project_seeds
from .rule import FileError

# (target, its display path, its bytes when the cache already read them, the functions the
# project pass found hot in it) -> a file's result
LintFn = Callable[[Target, str, Optional[bytes], frozenset], FileResult]
# (target, its display path) -> any outcome (a FileResult or, when fixing, a FileFix)
WorkFn = Callable[[Target, str], Any]


def display_path(path: Path, cwd: Path) -> str:
    """Relative to the working directory when inside it, else as given."""
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def error_result(target: Target, display: str, message: str) -> FileResult:
    linter = linter_for(target.settings.rules_for(target.path))
    return linter._error_result(display, FileError(message))


def _crash_message(reason: str) -> str:
    return f"internal error ({reason}); please report it"


# A safety net only: seeds only grow and summaries only go up a finite lattice, so the
# fixpoint ends long before.
_MAX_ROUNDS = 100


@dataclass
class ProjectResults:
    # every target's, in order; after the project pass only what is reported (path,
    # diagnostics, error, parsed) counts: a result served from the snapshot has no more
    results: list[FileResult]
    # per target index: its seeds (its functions other files call every step, what they pass
    # to them, the summaries of the functions of other files it calls)
    hot: dict[int, frozenset[str]]
    classes: ClassTree | None = None  # which class derives from which (None: not needed)


def lint_project(targets: Sequence[Target], cwd: Path, lint: LintFn, *, jobs: int | None,
                 cache: Cache | None) -> ProjectResults:
    """Every target's result, and the functions the project pass found hot in each.

    `targets` is the whole project: a file's result depends on what the others call."""

    def work_for(hot: dict[int, frozenset[str]], positions: dict[int, int]):
        def work(target: Target, display: str) -> tuple[FileResult, Record | None]:
            seeds = hot.get(positions.get(id(target), -1), frozenset())
            if cache is None:
                return lint(target, display, None, seeds), None
            return cache.lint(target, display, lambda t, raw: lint(t, display, raw, seeds), seeds)
        return work

    displays = [display_path(t.path, cwd) for t in targets]
    if cache is not None:
        last = snapshot.load(cache, targets, displays)
        if last is not None:
            return ProjectResults(*last)
    index = ProjectIndex([t.path for t in targets])
    done = _project_pass(targets, cwd, work_for, index, jobs=jobs, cache=cache)
    # Every file's chains, not only the named files': the snapshot serves any of them.
    attach_hot_paths(done.results, index, done.classes)
    if cache is not None:
        snapshot.store(cache, targets, displays, done.results, done.hot)
    return done


def _project_pass(targets: Sequence[Target], cwd: Path, work_for, index: ProjectIndex, *, jobs: int | None,
                  cache: Cache | None) -> ProjectResults:
    """Every file analyzed, then again with the seeds the others give it, to a fixpoint."""
    positions = {id(t): i for i, t in enumerate(targets)}
    results = list(run_targets(targets, cwd, work_for({}, positions), jobs=jobs, cache=cache))
    hot: dict[int, frozenset[str]] = {}
    if not any(r.hot_calls or r.bound_calls or r.calls or r.overrides for r in results):
        return ProjectResults(results, hot)
    # What each file's functions return, joined over the rounds (a file analyzed with more
    # seeds may say more), and every name each file was found to call.
    summaries: list[dict[str, str]] = [{} for _ in results]
    calls: list[set[str]] = [set() for _ in results]
    for i, result in enumerate(results):
        _learn(summaries[i], calls[i], result)
    reexports = [r.reexports for r in results]
    classes = ClassTree(index, [r.bases for r in results], reexports)
    for _ in range(_MAX_ROUNDS):
        found = project_seeds(index, [r.hot_calls for r in results], [r.bound_calls for r in results],
                              calls, summaries, reexports)
        for i, seeds in classes.override_seeds([r.overrides for r in results]).items():
            found.setdefault(i, set()).update(seeds)
        # Seeds only grow (a name once hot stays hot, a summary only goes up), so the rounds
        # reach a fixpoint however long the chain of helpers calling helpers across files is.
        grown = {i: _grow(hot.get(i, frozenset()), seeds) for i, seeds in found.items()}
        changed = sorted(i for i, seeds in grown.items() if seeds != hot.get(i, frozenset()))
        if not changed:
            break
        hot.update({i: grown[i] for i in changed})
        again = [targets[i] for i in changed]
        redone = run_targets(again, cwd, work_for(hot, positions), jobs=jobs, cache=cache, remember=False,
                             seeds_of=lambda target: hot.get(positions[id(target)], frozenset()))
        for i, result in zip(changed, redone):
            results[i] = result
            _learn(summaries[i], calls[i], result)
    return ProjectResults(results, hot, classes)


def _learn(summaries: dict[str, str], calls: set[str], result: FileResult) -> None:
    calls.update(result.calls)
    for entry in result.summaries:
        name, _, summary = entry.rpartition("=")  # "f(t,mask=b)=b": codes hold no "="
        old = summaries.get(name)
        summaries[name] = summary if old is None else join_summaries(old, summary)


def _grow(old: frozenset[str], found: set[str]) -> frozenset[str]:
    """The seeds of the next round: the old ones and the new, where a summary of the same
    function replaces the old one (it is their join: summaries only go up)."""
    replaced = {seed.rpartition("=")[0] for seed in found if seed.startswith(IMPORTED)}
    kept = {seed for seed in old if not (seed.startswith(IMPORTED) and seed.rpartition("=")[0] in replaced)}
    return frozenset(kept | found)


def run_targets(targets: Sequence[Target], cwd: Path, work: Callable[[Target, str], tuple[Any, Record | None]],
                *, jobs: int | None, cache: Cache | None,
                reuse: Callable[[Target, FileResult], bool] | None = None,
                remember: bool = True, probe: bool = True,
                seeds_of: Callable[[Target], frozenset[str]] | None = None) -> Iterator[Any]:
    """`work(target, display)` for every target, in order, in parallel; a target whose
    cached result is current (and `reuse` accepts) yields that result instead. `work`
    returns (outcome, index record or None). `probe=False` skips the cache, `seeds_of`
    gives the project pass's seeds of a target (part of its entry's key),
    `remember=False` leaves the index alone."""
    displays = [display_path(t.path, cwd) for t in targets]
    hits: dict[int, FileResult] = {}
    misses: list[int] = []
    sizes: list[int] = []
    for index, target in enumerate(targets):
        if cache is not None and probe:
            seeds = seeds_of(target) if seeds_of is not None else frozenset()
            cached, size = cache.probe(target, displays[index], seeds)
            if cached is not None and (reuse is None or reuse(target, cached)):
                hits[index] = cached
                continue
        else:
            size = _size(target.path)
        misses.append(index)
        sizes.append(size)

    def run_one(position: int) -> tuple[Any, Record | None]:
        index = misses[position]
        with _collect_garbage_once():
            return work(targets[index], displays[index])

    def failed(position: int, reason: str) -> tuple[Any, Record | None]:
        index = misses[position]
        return error_result(targets[index], displays[index], _crash_message(reason)), None

    workers = effective_jobs(jobs, len(misses), sum(sizes))
    schedule = sorted(range(len(misses)), key=lambda p: -sizes[p])  # largest first
    outcomes = ordered_map(run_one, len(misses), jobs=workers, on_error=failed, schedule=schedule)
    for index, target in enumerate(targets):
        hit = hits.pop(index, None)
        if hit is not None:
            yield hit
            continue
        outcome, record = next(outcomes)
        if cache is not None and remember:
            cache.remember(target, record)
        yield outcome
    if cache is not None and remember:
        cache.flush()


@contextlib.contextmanager
def _collect_garbage_once() -> Iterator[None]:
    """No cyclic garbage collection while one file is analyzed, one young-generation
    collection after it. A file's tree and facts are all alive until it is done, so the
    collector's passes during the analysis find nothing and only cost time (about 15% of
    a run); the collection afterwards frees the file's reference cycles."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(1)


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0

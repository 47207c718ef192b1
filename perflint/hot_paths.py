"""Why a line runs every step, across files: the call chain from an entry point.

A file's analysis gives each finding in hot code its *local* chain (`Diagnostic.extra
["hot_path"]`: "path:row what", the entry point first). When that chain starts at a function
that only other files make hot (a seed of the project pass), the engine records the seed
(`extra["hot_seed"]`) and each file records, for every call it makes from hot code into
another file, the caller's own chain up to that call (`FileResult.hot_call_origins`).

After the project pass, `attach_hot_paths` joins them: the seed is replaced by the chain of
the caller that reaches it (a training script's before an evaluation or demo script's, then
the first by path and call, so the answer does not depend on which files were named),
recursively through helpers calling helpers. Cached results keep
only their local chains, so a caller's edit never invalidates a callee's cached findings.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import PurePath

from .engine import FileResult
from .project import ClassTree, ProjectIndex, resolved_calls
from .types import HOT_PATH_KEY as PATH_KEY
from .types import HOT_SEED_KEY as SEED_KEY

_MAX_DEPTH = 32  # cycles are cut by the visited set; this bounds pathological chains
# Scripts that run a model without training it: when a training script reaches the same
# helper, its chain is the better answer to "why does this run every step"
_NOT_TRAINING = re.compile(r"(?:^|_)(?:eval|evaluate|evaluation|test|demo|infer|inference|predict|val|validate|"
                           r"visuali[sz]e|benchmark)(?:_|$)")


def _not_training(path: str) -> bool:
    stem = PurePath(path).stem.lower()
    return bool(_NOT_TRAINING.search(stem)) and "train" not in stem  # `train_val.py` trains


def attach_hot_paths(results: list[FileResult], index: ProjectIndex, classes: ClassTree | None = None) -> None:
    """Complete the chains of every result's findings, in place (`classes`: the project
    pass's class tree, built here when it has none)."""
    if not any(SEED_KEY in d.extra for result in results for d in result.diagnostics):
        return  # every chain starts in its own file
    callers: dict[tuple[int, str], tuple[bool, str, int, str]] = {}
    calls = [r.hot_calls for r in results]
    reexports = [r.reexports for r in results]
    classes = classes or ClassTree(index, [r.bases for r in results], reexports)
    overridden = classes.resolved_overrides([r.overrides for r in results])
    for caller, call, target, name in [*resolved_calls(index, calls, reexports), *overridden]:
        key = (target, name.partition("(")[0])
        candidate = (_not_training(results[caller].path), results[caller].path, caller, call)
        if key not in callers or candidate < callers[key]:
            callers[key] = candidate
    memo: dict[tuple[int, str], list[str]] = {}

    def chain_to(file: int, seed: str, visiting: frozenset[tuple[int, str]]) -> list[str]:
        key = (file, seed)
        if key in memo:
            return memo[key]
        found = callers.get(key)
        if found is None or key in visiting or len(visiting) > _MAX_DEPTH:
            return []
        _evaluation, _path, caller, call = found
        steps, caller_seed = next(((list(path), seed_of) for entry, path, seed_of
                                   in results[caller].hot_call_origins if entry == call), ([], None))
        prefix = chain_to(caller, caller_seed, visiting | {key}) if caller_seed else []
        memo[key] = prefix + steps
        return memo[key]

    for i, result in enumerate(results):
        completed = []
        for d in result.diagnostics:
            seed = d.extra.get(SEED_KEY)
            if seed is None:
                completed.append(d)
                continue
            extra = {k: v for k, v in d.extra.items() if k != SEED_KEY}
            extra[PATH_KEY] = chain_to(i, seed, frozenset()) + list(d.extra.get(PATH_KEY, []))
            completed.append(replace(d, extra=extra))
        result.diagnostics = completed


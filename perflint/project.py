"""The project: its root, and how code in one file that runs every step makes the functions
it calls in other files run every step too.

The project root is the nearest directory above the named paths with a `pyproject.toml` or
a `.git` (or `--project-root`). Every Python file under it is read for its summary, whatever
paths are named, so a file's findings do not depend on which other files were named
(pre-commit names only the staged ones).

Each file's analysis reports the qualified names it calls from hot code (`FileResult.hot_calls`:
`.metrics.accuracy`, `mypkg.losses.dice`). This module maps them to the project files that
define those modules and returns, per file, the module-level functions that other files call
every step. The runner then analyzes those files again with those functions seeded as hot,
until nothing new turns hot (a fixpoint: seeds only grow, so it ends).

The seeds also carry what crosses files besides hotness (`project_seeds`): the loaders and
objects calls from any code pass (`~name(sig)`), and the summaries of the other files'
functions a file calls (`>qualname=summary`, see perflint.facts.summaries), asked for where
the answer can matter and followed on demand through helpers returning helpers. Classes
named in those codes are renamed for the file that reads them (`rebase`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from .facts.project_calls import (
    ANY_PACKAGE,
    ASKS_FOR,
    BOUND,
    FROM_STAR,
    IF_TRAINS,
    IMPORTED,
    INHERITED,
)
from .facts.summaries import TRAINS

PROJECT_MARKERS = ("pyproject.toml", ".git")


def find_project_root(path: Path) -> Path | None:
    """The nearest directory at or above `path` holding a `pyproject.toml` or `.git`;
    None when there is none (the named files are then the whole project)."""
    directory = Path(os.path.abspath(path))
    if not directory.is_dir():
        directory = directory.parent
    for candidate in (directory, *directory.parents):
        if any(os.path.exists(os.path.join(candidate, marker)) for marker in PROJECT_MARKERS):
            return candidate
    return None


def project_roots(paths: Sequence[Path], override: Path | None = None) -> list[Path]:
    """The project roots of the named paths (one per distinct root, in order)."""
    if override is not None:
        return [Path(os.path.abspath(override))]
    roots: list[Path] = []
    for path in paths:
        root = find_project_root(path)
        if root is not None and root not in roots:
            roots.append(root)
    return roots


def module_of(path: Path, packages: dict[str, tuple[tuple[str, ...], str]] | None = None) -> tuple[str, str]:
    """(dotted module name, import root) of a Python file, from its package directories:
    `src/pkg/sub/mod.py` with `__init__.py` in `pkg` and `sub` is `pkg.sub.mod`, root `src`.
    `packages` caches what each directory is, for many files of the same tree."""
    absolute = os.path.abspath(path)
    directory, filename = os.path.split(absolute)
    stem = filename.rsplit(".", 1)[0]
    package, root = _package_of(directory, {} if packages is None else packages)
    parts = package + ((stem,) if stem != "__init__" else ())
    return ".".join(parts), root


def _package_of(directory: str, packages: dict[str, tuple[tuple[str, ...], str]]) -> tuple[tuple[str, ...], str]:
    """(the package names a directory is, outermost first; the import root above them)."""
    known = packages.get(directory)
    if known is not None:
        return known
    parent, name = os.path.split(directory)
    # a directory whose name is no identifier (`fast-autoaugment/`, a clone with an
    # `__init__.py` at its top) cannot be imported as a package: it is the import root
    if parent != directory and name.isidentifier() and os.path.isfile(os.path.join(directory, "__init__.py")):
        outer, root = _package_of(parent, packages)
        known = (outer + (name,), root)
    else:
        known = ((), directory)
    packages[directory] = known
    return known


class ProjectIndex:
    """Which checked file defines which module."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.modules: list[tuple[str, str, bool]] = []  # (module, root, is a package __init__)
        self._by_name: dict[str, list[int]] = {}
        self._roots: dict[int, list[str]] = {}  # the roots of a file's namespace-package names
        self._by_last_name: dict[str, list[int]] = {}  # `message_hub` -> `pkg.logging.message_hub`
        # (file, name as it calls it) -> where that is defined: the rounds of the project
        # pass resolve the same names again and again
        self.targets: dict[tuple[int, str], tuple[int, str] | None] = {}
        self.rebased: dict[tuple[str, int, int], str] = {}
        # (file, class) -> (its base class in another project file, the methods the class
        # itself defines): filled by `ClassTree`, so that `Sub.method` lands where `method` is
        self.parents: dict[tuple[int, str], tuple[tuple[int, str], frozenset[str]]] = {}
        self.paths = list(paths)
        self._top_level_names: dict[int, frozenset[str]] = {}
        self._method_names: dict[int, frozenset[str]] = {}
        self._exports: tuple[list[dict[str, str]], list] = ([], [])
        packages: dict[str, tuple[tuple[str, ...], str]] = {}
        for index, path in enumerate(paths):
            if path.suffix not in (".py", ".pyi"):
                self.modules.append(("", "", False))
                continue
            name, root = module_of(path, packages)
            self.modules.append((name, root, path.name == "__init__.py"))
            if name:
                self._by_name.setdefault(name, []).append(index)
                self._by_last_name.setdefault(name.rpartition(".")[2], []).append(index)
                # `utils/general.py` with no `utils/__init__.py` (a namespace package, or a
                # script directory on sys.path) is imported as `utils.general` too
                for longer, longer_root in _namespace_names(name, root):
                    self._by_name.setdefault(longer, []).append(index)
                    self._roots.setdefault(index, []).append(longer_root)

    def exports(self, reexports: Sequence[Sequence[tuple[str, str]]]) -> list[dict[str, str]]:
        """Per file, what its `__init__.py` re-exports (name -> where from), as dicts."""
        known = self._exports[1]
        if len(known) != len(reexports) or any(a is not b for a, b in zip(known, reexports)):
            self._exports = ([dict(names) for names in reexports], list(reexports))
        return self._exports[0]

    def _absolute(self, caller: int, qualname: str) -> str | None:
        if not qualname.startswith("."):
            return qualname
        level = len(qualname) - len(qualname.lstrip("."))
        module, _root, is_package = self.modules[caller]
        package = module.split(".") if module else []
        if not is_package:
            package = package[:-1]
        if level - 1 > len(package):
            return None
        base = package[: len(package) - (level - 1)]
        rest = qualname[level:]
        return ".".join(base + ([rest] if rest else []))

    def resolve(self, caller: int, qualname: str) -> tuple[int, str] | None:
        """(index of the file defining it, name in that file) for a module-level function
        (`pkg.losses.dice` -> "dice") or a method of a module-level class
        (`pkg.metrics.ConfusionMatrix.process_batch` -> "ConfusionMatrix.process_batch"), or a
        method in the one module of a name (`*.message_hub.MessageHub.update_scalar`: see
        `facts.project_calls.by_attribute_name`)."""
        if qualname.startswith(FROM_STAR):  # `*?datasets|utils.accuracy`
            modules, _, rest = qualname[len(FROM_STAR):].partition(".")
            for module in modules.split("|"):
                found = self.resolve(caller, f"{module.replace('/', '.')}.{rest}")
                if found is not None and self.defines(found[0], rest.partition(".")[0]):
                    return found
            return None
        if qualname.startswith(ANY_PACKAGE):  # `*.message_hub.MessageHub.update_scalar`
            module, _, name = qualname[len(ANY_PACKAGE):].partition(".")
            files = self._by_last_name.get(module, [])
            return (files[0], name) if len(files) == 1 and name else None
        absolute = self._absolute(caller, qualname)
        if not absolute or "." not in absolute:
            return None
        parts = absolute.split(".")
        candidates: list[tuple[int, str]] = []
        for split in (len(parts) - 1, len(parts) - 2):  # module.function, module.Class.method
            if split < 1:
                break
            module_file = self._module_file(caller, ".".join(parts[:split]))
            if module_file is not None:
                candidates.append((module_file, ".".join(parts[split:])))
        if len(candidates) == 2 and not self.defines(*candidates[0]) and self.defines(candidates[1][0],
                                                                                        parts[-2]):
            # `TD3.TD3.train` in a directory named TD3: the class TD3 of TD3.py, not a
            # function `train` of the namespace module `TD3.TD3`
            return candidates[1]
        return candidates[0] if candidates else None

    def defines(self, file: int, name: str) -> bool:
        """Does file `file` define `name` at module level (a def, a class, an assignment)?
        Read from its text, once, only for the modules `import *` brings names from."""
        if file not in self._top_level_names:
            self._top_level_names[file] = frozenset(a or b for a, b in _TOP_LEVEL_NAME.findall(self._text(file)))
        return name in self._top_level_names[file]

    def defines_method(self, file: int, name: str) -> bool:
        """Does some class of file `file` define a method `name` (read from its text, once, only
        for the files an inherited call may land in): `self.q_proj(x)` is an attribute."""
        if file not in self._method_names:
            self._method_names[file] = frozenset(_METHOD_NAME.findall(self._text(file)))
        return name in self._method_names[file]

    def _text(self, file: int) -> str:
        try:
            return self.paths[file].read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def _module_file(self, caller: int, module: str) -> int | None:
        candidates = self._by_name.get(module)
        if not candidates:
            return None
        if len(candidates) > 1:  # the same module name under two roots: take the caller's
            root = self.modules[caller][1]
            same_root = [c for c in candidates if self.modules[c][1] == root]
            if len(same_root) == 1:  # `import utils` beside `utils.py`, not `models/utils.py`
                return same_root[0]
            candidates = [c for c in candidates
                          if self.modules[c][1] == root or root in self._roots.get(c, ())]
            if len(candidates) != 1:
                return None
        return candidates[0]


_NAMESPACE_DEPTH = 3  # directories above a file that may be on sys.path as an import root


def _namespace_names(name: str, root: str) -> list[tuple[str, str]]:
    """Longer dotted names for a module whose root directory has no `__init__.py`:
    `general` in `repo/utils/` is also `utils.general` (root `repo/`)."""
    names = []
    directory = root
    for _ in range(_NAMESPACE_DEPTH):
        parent, base = os.path.split(directory)
        if parent == directory or not base.isidentifier():
            break
        name = f"{base}.{name}"
        directory = parent
        names.append((name, directory))
    return names


def resolved_calls(index: ProjectIndex, hot_calls: Sequence[Sequence[str]],
                   reexports: Sequence[Sequence[tuple[str, str]]] = ()) -> Iterator[tuple[int, str, int, str]]:
    """(caller index, the call as recorded, callee file index, callee name with the call's
    signature) for every hot call that lands in another project file. A name a package's
    `__init__.py` imports from a submodule is followed there; the classes the signature
    names are named as the callee's file sees them (`rebase`)."""
    exported = index.exports(reexports)
    for caller, calls in enumerate(hot_calls):
        for call in calls:
            qualname, paren, signature = call.partition("(")  # `pkg.ops.nms(t,-)`
            target = _target(index, exported, caller, qualname)
            if target is not None and target[0] != caller:
                signature = rebase(signature, index, exported, caller, target[0])
                yield caller, call, target[0], target[1] + paren + signature


def _target(index: ProjectIndex, exported: Sequence[dict[str, str]], caller: int,
            qualname: str) -> tuple[int, str] | None:
    """Where `qualname`, as file `caller` names it, is defined: (file index, name there)."""
    key = (caller, qualname)
    if key in index.targets:
        return index.targets[key]
    target = index.targets[key] = _follow(index, exported, caller, qualname)
    return target


def _follow(index: ProjectIndex, exported: Sequence[dict[str, str]], caller: int,
            qualname: str) -> tuple[int, str] | None:
    target = index.resolve(caller, qualname)
    for _ in range(_REEXPORT_HOPS):  # `from .utils import to_dense_batch` in __init__
        if target is None or target[0] >= len(exported):
            break
        head, _, rest = target[1].partition(".")
        source = exported[target[0]].get(head)
        if source is None:
            break
        target = index.resolve(target[0], source + ("." + rest if rest else ""))
    return _defining_class(index, target)


def _defining_class(index: ProjectIndex, target: tuple[int, str] | None) -> tuple[int, str] | None:
    """`NeRFNetwork.render`, where `NeRFNetwork` only inherits `render` from `NeRFRenderer`
    in another file: `NeRFRenderer.render` there (up the chain of project base classes)."""
    for _ in range(_INHERITANCE_HOPS):
        if target is None:
            return None
        cls, dot, method = target[1].partition(".")
        parent = index.parents.get((target[0], cls)) if dot and "." not in method else None
        if parent is None or method in parent[1]:
            return target
        target = (parent[0][0], f"{parent[0][1]}.{method}")
    return target


# `@pkg.mod.Cls` (a class as the writing file imports it) and `%Cls` (a class of the writing
# file) in the codes of signatures and summaries (see perflint.facts.summaries)
_CLASS_CODE = re.compile(r"([@%])(\.*[A-Za-z_][\w.]*)")


def rebase(code: str, index: ProjectIndex, exported: Sequence[dict[str, str]], source: int, target: int) -> str:
    """A code written by file `source`, for file `target` to read: each class it names is
    named by its module (`@pkg.mod.Cls`), or `%Cls` when `target` defines it; a class that
    is not a project file's is "-"."""
    if "@" not in code and "%" not in code:
        return code
    key = (code, source, target)
    if key in index.rebased:
        return index.rebased[key]

    def swap(match: re.Match) -> str:
        found = (source, match.group(2)) if match.group(1) == "%" \
            else _target(index, exported, source, match.group(2))
        if found is None or "." in found[1]:
            return "-"
        if found[0] == target:
            return "%" + found[1]
        module = index.modules[found[0]][0]
        return f"@{module}.{found[1]}" if module else "-"

    index.rebased[key] = _CLASS_CODE.sub(swap, code)
    return index.rebased[key]


def project_seeds(index: ProjectIndex, hot_calls: Sequence[Sequence[str]], bound_calls: Sequence[Sequence[str]],
                  calls: Sequence[Iterable[str]], summaries: Sequence[dict[str, str]],
                  reexports: Sequence[Sequence[tuple[str, str]]] = ()) -> dict[int, set[str]]:
    """Per file index, its seeds (see perflint.facts.project_calls): the functions other
    files call every step ("name(sig)"), pass loaders or objects to ("~name(sig)"), and the
    summaries of the other files' functions it calls (">qualname=summary")."""
    seeds: dict[int, set[str]] = {}
    for _caller, _call, target, name in resolved_calls(index, hot_calls, reexports):
        seeds.setdefault(target, set()).add(name)
    for _caller, _call, target, name in resolved_calls(index, bound_calls, reexports):
        if _BINDS.search(name.partition("(")[2]):  # still a loader or a project object
            seeds.setdefault(target, set()).add(BOUND + name)
    exported = index.exports(reexports)
    shaped: dict[int, dict[str, list[str]]] = {}  # file -> function -> its "Name(shape)" entries
    for caller, qualname, defined_at, if_trains in _wanted(index, exported, calls):
        file, name = defined_at
        if file not in shaped:
            shaped[file] = {}
            for entry in summaries[file]:
                if entry.endswith(")"):
                    shaped[file].setdefault(entry.partition("(")[0], []).append(entry)
        for entry in [name] + shaped[file].get(name, []):
            summary = summaries[file].get(entry)
            if summary and not (if_trains and not summary.endswith(TRAINS)):
                summary = rebase(summary, index, exported, file, caller)
                seeds.setdefault(caller, set()).add(f"{IMPORTED}{qualname}{entry[len(name):]}={summary}")
    return seeds


class ClassTree:
    """Which top-level classes of the project derive from which, across files, and the
    methods each defines (from `FileResult.bases`: "Sub<qualified base:method method ...").
    Built once per run: bases do not depend on seeds."""

    def __init__(self, index: ProjectIndex, bases: Sequence[Sequence[str]],
                 reexports: Sequence[Sequence[tuple[str, str]]] = ()) -> None:
        self.index = index
        self.exported = index.exports(reexports)
        self.subclasses: dict[tuple[int, str], list[tuple[int, str]]] = {}
        self.defines: dict[tuple[int, str], frozenset[str]] = {}
        self._below: dict[tuple[int, str], list[tuple[int, str]]] = {}
        # per file: its last `overrides` tuple and what it resolved to (rounds of the
        # project pass ask again for the files whose results did not change)
        self._resolved: dict[int, tuple[Sequence[str], list[tuple[int, str, int, str]]]] = {}
        for file, entries in enumerate(bases):
            for entry in entries:
                name, _, rest = entry.partition("<")
                base, _, methods = rest.partition(":")
                self.defines[(file, name)] = frozenset(methods.split())
                target = _target(index, self.exported, file, base)
                if target is not None:
                    self.subclasses.setdefault(target, []).append((file, name))
                    if "." not in target[1]:
                        index.parents[(file, name)] = (target, self.defines[(file, name)])
        index.targets.clear()  # names of inherited methods resolved before this land elsewhere now

    def descendants(self, key: tuple[int, str]) -> list[tuple[int, str]]:
        if key not in self._below:
            seen = {key}
            work = list(self.subclasses.get(key, ()))
            while work:
                sub = work.pop()
                if sub not in seen:
                    seen.add(sub)
                    work.extend(self.subclasses.get(sub, ()))
            self._below[key] = sorted(seen - {key})
        return self._below[key]

    def resolved_overrides(self, overrides: Sequence[Sequence[str]]) -> Iterator[tuple[int, str, int, str]]:
        """(caller index, the `self.method(...)` call as recorded, file of a subclass,
        "Sub.method" with the call's signature) for every override in another file of a
        method the hot code of a base class calls on `self`: a trainer's loop in
        `BaseTrainer.train` calling `self.train_on_batch(batch)` runs `Trainer.train_on_batch`
        of the subclass in `trainer.py` every step (also through subclasses of subclasses)."""
        if not self.subclasses:
            return
        for file, calls in enumerate(overrides):
            known = self._resolved.get(file)
            if known is None or known[0] is not calls:
                known = self._resolved[file] = (calls, list(self._resolve(file, calls)))
            yield from known[1]

    def _resolve(self, file: int, calls: Sequence[str]) -> Iterator[tuple[int, str, int, str]]:
        for call in calls:
            inherited = call.startswith(INHERITED)
            call = call.removeprefix(INHERITED)
            cls, _, rest = call.partition(".")  # "Class.method(sig)": classes are top-level
            method, paren, signature = rest.partition("(")
            if inherited:  # up to the base class in another file that defines it
                found = _defining_class(self.index, (file, f"{cls}.{method}"))
                if found is not None and found[0] != file and self.index.defines_method(found[0], method):
                    rebased = rebase(signature, self.index, self.exported, file, found[0])
                    yield file, call, found[0], f"{found[1]}{paren}{rebased}"
                continue
            if (file, cls) not in self.subclasses:
                continue  # most classes have no subclass anywhere
            for sub in self.descendants((file, cls)):
                # its own override only; the base's own file walks its local subclasses itself
                if sub[0] != file and method in self.defines.get(sub, ()):
                    rebased = rebase(signature, self.index, self.exported, file, sub[0])
                    yield file, call, sub[0], f"{sub[1]}.{method}{paren}{rebased}"

    def override_seeds(self, overrides: Sequence[Sequence[str]]) -> dict[int, set[str]]:
        """Per file index, the overrides of its classes that run every step."""
        seeds: dict[int, set[str]] = {}
        for _caller, _call, target, name in self.resolved_overrides(overrides):
            seeds.setdefault(target, set()).add(name)
        return seeds


def _wanted(index: ProjectIndex, exported: Sequence[dict[str, str]],
            calls: Sequence[Iterable[str]]) -> Iterator[tuple[int, str, tuple[int, str], bool]]:
    """(file, qualified name it calls, where that is defined, whether only a training step's
    summary is wanted) for each call of another file's function whose summary is wanted: a
    call in code the report walks, or one whose value a function returns when another file
    wants that function's summary (on demand, so that a chain of helpers returning helpers
    is followed only as far as someone looks)."""
    plain: list[list[str]] = []
    pending: list[dict[str, list[str]]] = []
    for names in calls:
        plain.append([])
        pending.append({})
        for name in names:
            qualname, asks, key = name.partition(ASKS_FOR)
            if asks:
                pending[-1].setdefault(key, []).append(qualname)
            else:
                plain[-1].append(qualname)
    demanded: set[tuple[int, str]] = set()
    work = [(caller, qualname) for caller, names in enumerate(plain) for qualname in names]
    seen: set[tuple[int, str]] = set()
    while work:
        caller, qualname = work.pop()
        if (caller, qualname) in seen:
            continue
        seen.add((caller, qualname))
        if_trains = qualname.endswith(IF_TRAINS)
        name = qualname.removesuffix(IF_TRAINS)
        target = _target(index, exported, caller, name)
        if target is None or target[0] == caller:
            continue
        yield caller, name, target, if_trains
        if target not in demanded:
            demanded.add(target)
            work.extend((target[0], more) for more in pending[target[0]].get(target[1], ()))


_BINDS = re.compile(r"(?:^|[,=])[L@%^]")  # a loader, a project object, a moved return


def hot_functions(index: ProjectIndex, hot_calls: Sequence[Sequence[str]],
                  reexports: Sequence[Sequence[tuple[str, str]]] = ()) -> dict[int, frozenset[str]]:
    """Per file index, the functions (and `Class.method`s) other files call from hot code."""
    found: dict[int, set[str]] = {}
    for _caller, _call, target, name in resolved_calls(index, hot_calls, reexports):
        found.setdefault(target, set()).add(name)
    return {k: frozenset(v) for k, v in found.items()}


_METHOD_NAME = re.compile(r"^[ \t]+(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)", re.M)
_TOP_LEVEL_NAME = re.compile(r"^(?:async\s+def|def|class)\s+([A-Za-z_]\w*)|^([A-Za-z_]\w*)\s*[:=]", re.M)
_REEXPORT_HOPS = 3
_INHERITANCE_HOPS = 8

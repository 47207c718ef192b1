"""The project pass: code in one file that runs every step makes the functions it calls in
other files run every step too.

Each file's analysis reports the qualified names it calls from hot code (`FileResult.hot_calls`:
`.metrics.accuracy`, `mypkg.losses.dice`). This module maps them to the checked files that
define those modules and returns, per file, the module-level functions that other files call
every step. The runner then analyzes those files again with those functions seeded as hot,
until nothing new turns hot.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

MAX_ROUNDS = 4  # seeding can chain (a helper calling a helper in a third file); bounded


def module_of(path: Path) -> tuple[str, str]:
    """(dotted module name, import root) of a Python file, from its package directories:
    `src/pkg/sub/mod.py` with `__init__.py` in `pkg` and `sub` is `pkg.sub.mod`, root `src`."""
    absolute = Path(os.path.abspath(path))
    parts = [absolute.stem] if absolute.stem != "__init__" else []
    directory = absolute.parent
    while (directory / "__init__.py").is_file() and directory.parent != directory:
        parts.append(directory.name)
        directory = directory.parent
    return ".".join(reversed(parts)), str(directory)


class ProjectIndex:
    """Which checked file defines which module."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.modules: list[tuple[str, str, bool]] = []  # (module, root, is a package __init__)
        self._by_name: dict[str, list[int]] = {}
        for index, path in enumerate(paths):
            if path.suffix not in (".py", ".pyi"):
                self.modules.append(("", "", False))
                continue
            name, root = module_of(path)
            self.modules.append((name, root, path.name == "__init__.py"))
            if name:
                self._by_name.setdefault(name, []).append(index)

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
        """(index of the file defining it, function name) for a module-level function."""
        absolute = self._absolute(caller, qualname)
        if not absolute or "." not in absolute:
            return None
        module, _, function = absolute.rpartition(".")
        candidates = self._by_name.get(module)
        if not candidates:
            return None
        if len(candidates) > 1:  # the same module name under two roots: take the caller's
            root = self.modules[caller][1]
            candidates = [c for c in candidates if self.modules[c][1] == root]
            if len(candidates) != 1:
                return None
        return candidates[0], function


def hot_functions(index: ProjectIndex, hot_calls: Sequence[Sequence[str]]) -> dict[int, frozenset[str]]:
    """Per file index, the functions other files call from hot code."""
    found: dict[int, set[str]] = {}
    for caller, calls in enumerate(hot_calls):
        for qualname in calls:
            target = index.resolve(caller, qualname)
            if target is not None and target[0] != caller:
                found.setdefault(target[0], set()).add(target[1])
    return {k: frozenset(v) for k, v in found.items()}

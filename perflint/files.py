"""Which files to check: `*.py`, `*.pyi` and `*.ipynb` below the given paths, minus the
default excludes, configured excludes and `.gitignore`d paths. Paths given by name are
always checked unless `--force-exclude` is set (that is what pre-commit needs)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pathspec

from .config import Settings, SettingsResolver

EXTENSIONS = (".py", ".pyi", ".ipynb")


@dataclass(frozen=True)
class Target:
    path: Path
    settings: Settings
    explicit: bool  # given by name on the command line


@dataclass(frozen=True)
class MissingPath:
    path: Path
    reason: str


class _GitIgnore:
    """Nested .gitignore files plus .git/info/exclude, read once per directory."""

    def __init__(self) -> None:
        self._specs: dict[Path, pathspec.PathSpec | None] = {}
        self._repo_root: dict[Path, Path | None] = {}

    def _spec(self, directory: Path) -> pathspec.PathSpec | None:
        if directory in self._specs:
            return self._specs[directory]
        lines: list[str] = []
        for name in (".gitignore", ".ignore"):
            try:
                with open(directory / name, encoding="utf-8", errors="replace") as handle:
                    lines.extend(handle.read().splitlines())
            except OSError:
                pass
        if (directory / ".git").is_dir():
            try:
                with open(directory / ".git" / "info" / "exclude", encoding="utf-8", errors="replace") as handle:
                    lines.extend(handle.read().splitlines())
            except OSError:
                pass
        spec = pathspec.PathSpec.from_lines("gitwildmatch", lines) if lines else None
        self._specs[directory] = spec
        return spec

    def ignored(self, path: Path, is_dir: bool, stop: Path) -> bool:
        """Is `path` ignored by any .gitignore between `stop` (inclusive) and its parent?"""
        directory = path.parent
        while True:
            spec = self._spec(directory)
            if spec is not None:
                rel = path.relative_to(directory).as_posix()
                if spec.match_file(rel + ("/" if is_dir else "")):
                    return True
            if directory == stop or directory.parent == directory or (directory / ".git").exists():
                return False
            directory = directory.parent


def discover(
    paths: list[Path], resolver: SettingsResolver, force_exclude: bool | None = None
) -> Iterator[Target | MissingPath]:
    gitignore = _GitIgnore()
    seen: set[Path] = set()
    for given in paths:
        try:
            is_dir = given.is_dir()
        except OSError as exc:
            yield MissingPath(given, exc.strerror or str(exc))
            continue
        if not is_dir:
            if not os.path.lexists(given):
                yield MissingPath(given, "no such file or directory")
                continue
            settings = resolver.for_path(given)
            forced = settings.force_exclude if force_exclude is None else force_exclude
            if forced and (settings.is_excluded(given, all_components=True) or _gitignored(gitignore, given, settings)):
                continue
            key = Path(os.path.abspath(given))
            if key not in seen:
                seen.add(key)
                yield Target(given, settings, explicit=True)
            continue
        root_settings = resolver.for_path(given / "__init__.py")
        forced = root_settings.force_exclude if force_exclude is None else force_exclude
        if forced and root_settings.is_excluded(given, all_components=True):
            continue
        yield from _walk(given, resolver, gitignore, seen)


def _gitignored(gitignore: _GitIgnore, path: Path, settings: Settings) -> bool:
    if not settings.respect_gitignore:
        return False
    absolute = Path(os.path.abspath(path))
    return gitignore.ignored(absolute, False, absolute.anchor and Path(absolute.anchor))  # type: ignore[arg-type]


def _walk(root: Path, resolver: SettingsResolver, gitignore: _GitIgnore, seen: set[Path]) -> Iterator[Target]:
    absolute_root = Path(os.path.abspath(root))
    stack = [(root, absolute_root)]
    while stack:
        directory, absolute = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        settings = resolver.for_path(directory / "__init__.py")
        subdirs = []
        for entry in entries:
            path = directory / entry.name
            abs_path = absolute / entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_link = entry.is_symlink()
            except OSError:
                continue
            if is_dir:
                if settings.is_excluded(path):
                    continue
                if settings.respect_gitignore and gitignore.ignored(abs_path, True, absolute_root):
                    continue
                subdirs.append((path, abs_path))
                continue
            if not entry.name.endswith(EXTENSIONS):
                continue
            if is_link:
                try:
                    if stat.S_ISDIR(os.stat(path).st_mode):
                        continue
                except OSError:
                    pass  # broken link or loop: reported when read
            if settings.is_excluded(path):
                continue
            if settings.respect_gitignore and gitignore.ignored(abs_path, False, absolute_root):
                continue
            if abs_path in seen:
                continue
            seen.add(abs_path)
            yield Target(path, resolver.for_path(path), explicit=False)
        stack.extend(reversed(subdirs))

"""Which files to check: `*.py`, `*.pyi` and `*.ipynb` below the given paths, minus the
default excludes, configured excludes and `.gitignore`d paths. Paths given by name are
always checked unless `--force-exclude` is set (that is what pre-commit needs)."""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pathspec

from .config import ConfigError, Settings, SettingsResolver, path_matches
from .fileio import read_error

EXTENSIONS = (".py", ".pyi", ".ipynb")


@dataclass(frozen=True)
class Target:
    path: Path
    settings: Settings
    explicit: bool  # given by name on the command line
    # Set for a directory that cannot be listed: it is reported (PFL001) instead of read.
    error: str | None = None


@dataclass(frozen=True)
class MissingPath:
    path: Path
    reason: str


IgnoreChain = list[tuple[str, pathspec.PathSpec]]  # (path prefix, spec), innermost first


def matches_chain(chain: IgnoreChain, full: str, is_dir: bool) -> bool:
    """Does any spec of `chain` ignore the file or directory at the absolute path `full`?"""
    for prefix, spec in chain:
        rel = full[len(prefix):]
        if os.sep != "/":
            rel = rel.replace(os.sep, "/")
        if spec.match_file(rel + ("/" if is_dir else "")):
            return True
    return False


class _GitIgnore:
    """Nested .gitignore files plus .git/info/exclude, read once per directory."""

    def __init__(self) -> None:
        self._specs: dict[Path, pathspec.PathSpec | None] = {}
        self._chains: dict[tuple[Path, Path], list[tuple[str, pathspec.PathSpec]]] = {}

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
        spec = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None  # git's own semantics
        self._specs[directory] = spec
        return spec

    def ignored(self, path: Path, is_dir: bool, stop: Path) -> bool:
        """Is `path` ignored by any .gitignore between `stop` (inclusive) and its parent?"""
        return matches_chain(self.chain(path.parent, stop), str(path), is_dir)

    def chain(self, directory: Path, stop: Path) -> IgnoreChain:
        """The ignore specs that apply below `directory`, innermost first, with the path
        prefix to strip from a path below them; computed once per directory, because
        looking for `.git` at every level for every file costs a stat each."""
        key = (directory, stop)
        chain = self._chains.get(key)
        if chain is None:
            chain = []
            current = directory
            while True:
                spec = self._spec(current)
                if spec is not None:
                    chain.append((os.path.join(str(current), ""), spec))
                if current == stop or current.parent == current or (current / ".git").exists():
                    break
                current = current.parent
            self._chains[key] = chain
        return chain


def discover(
    paths: list[Path], resolver: SettingsResolver, force_exclude: bool | None = None, lenient: bool = False,
    skip: frozenset[str] = frozenset(),
) -> Iterator[Target | MissingPath]:
    """The files below `paths`. `lenient` (the walk of the rest of the project, whose files
    are read but not reported): a directory whose configuration is broken is skipped with a
    warning (`resolver.warnings`) instead of ending the run. `skip`: absolute paths of
    directories not to enter (their files were found already)."""
    gitignore = _GitIgnore()
    seen: set[str] = set()
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
            key = os.path.abspath(given)
            if key not in seen:
                seen.add(key)
                yield Target(given, settings, explicit=True)
            continue
        if os.path.abspath(given) in skip:
            continue
        root_settings = resolver.for_path(given / "__init__.py")
        forced = root_settings.force_exclude if force_exclude is None else force_exclude
        if forced and root_settings.is_excluded(given, all_components=True):
            continue
        yield from _walk(given, resolver, gitignore, seen, lenient, skip)


def _gitignored(gitignore: _GitIgnore, path: Path, settings: Settings) -> bool:
    if not settings.respect_gitignore:
        return False
    absolute = Path(os.path.abspath(path))
    return gitignore.ignored(absolute, False, absolute.anchor and Path(absolute.anchor))  # type: ignore[arg-type]


def _walk(root: Path, resolver: SettingsResolver, gitignore: _GitIgnore, seen: set[str],
          lenient: bool = False, skip: frozenset[str] = frozenset()) -> Iterator[Target]:
    absolute_root = Path(os.path.abspath(root))
    # (directory as given, its absolute path, the settings of the directory above)
    stack: list[tuple[Path, str, Settings | None]] = [(root, str(absolute_root), None)]
    exclusions: dict[int, Callable[[Path], bool]] = {}  # the resolver keeps the settings alive
    while stack:
        directory, absolute, inherited = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            # Reported as a finding (PFL001) rather than skipped without a word; a directory
            # that vanished meanwhile is not worth one.
            if exc.errno != errno.ENOENT and absolute not in seen:
                seen.add(absolute)
                # the settings of the directory above (its own pyproject.toml cannot be read)
                settings = _settings(resolver, directory, lenient)
                if settings is not None:
                    yield Target(directory, settings, explicit=False, error=read_error(directory, exc, "its files"))
            continue
        # Settings come from the nearest pyproject.toml above: a directory without one has
        # its parent's (the walk does not follow links to directories).
        settings = inherited
        if settings is None or any(entry.name == "pyproject.toml" for entry in entries):
            settings = _settings(resolver, directory, lenient, directory / "__init__.py")  # also every file's here
        if settings is None:
            continue
        excluded = exclusions.get(id(settings))
        if excluded is None:
            excluded = exclusions[id(settings)] = _exclusion(settings)
        chain = gitignore.chain(Path(absolute), absolute_root) if settings.respect_gitignore else []
        subdirs = []
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir and not name.endswith(EXTENSIONS):
                continue
            path = directory / name
            abs_path = os.path.join(absolute, name)
            if is_dir:
                if abs_path in skip or excluded(path) or (chain and matches_chain(chain, abs_path, True)):
                    continue
                subdirs.append((path, abs_path, settings))
                continue
            try:
                is_link = entry.is_symlink()
            except OSError:
                continue
            if is_link:
                try:
                    if stat.S_ISDIR(os.stat(path).st_mode):
                        continue
                except OSError:
                    pass  # broken link or loop: reported when read
            if excluded(path) or (chain and matches_chain(chain, abs_path, False)):
                continue
            if abs_path in seen:
                continue
            seen.add(abs_path)
            yield Target(path, settings, explicit=False)
        stack.extend(reversed(subdirs))


def _settings(resolver: SettingsResolver, directory: Path, lenient: bool, lookup: Path | None = None
              ) -> Settings | None:
    """The settings of `directory` (looked up as `lookup`); None, with a warning, when its
    configuration is broken and the walk is `lenient`."""
    try:
        return resolver.for_path(lookup or directory)
    except ConfigError as exc:
        if not lenient:
            raise
        resolver.warn(f"{exc}; the files below {directory} are not read for the project analysis")
        return None


def _exclusion(settings: Settings) -> Callable[[Path], bool]:
    """`settings.is_excluded` for walked entries, with the bare-name patterns (all of the
    default ones) compiled into one regular expression instead of one fnmatch each."""
    patterns = settings.exclude + settings.extend_exclude
    bare = [p.rstrip("/") for p in patterns if "/" not in p.rstrip("/")]
    others = [p for p in patterns if "/" in p.rstrip("/")]
    names = re.compile("|".join(fnmatch.translate(p) for p in bare)) if bare else None
    root = settings.root

    def excluded(path: Path) -> bool:
        if names is not None and names.match(path.name):
            return True
        return any(path_matches(path, p, root, False) for p in others)

    return excluded

"""`[tool.perflint]` in the nearest pyproject.toml, merged with command-line options.

As in ruff, the closest pyproject.toml that has a `[tool.perflint]` table applies to a file,
nothing is merged across files, and command-line options beat the file. Settings are
resolved once per directory.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from .registry import SelectorError, resolve_rules, validate_selectors
from .rule import Rule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(Exception):
    """A configuration problem: unknown key or code, bad type, unreadable file (exit 2)."""


DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
    ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".perflint_cache",
    ".svn", ".tox", ".venv", ".vscode", "__pypackages__", "_build", "buck-out", "build", "dist",
    "node_modules", "site-packages", "venv", "__pycache__",
    # Run-output directories: training scripts copy their sources into them as a record of
    # the run (Pointnet2's `shutil.copy('models/x.py', 'log/...')`); those copies never run.
    "log", "logs", "lightning_logs", "mlruns",
)

_LIST_KEYS = ("select", "extend-select", "ignore", "exclude", "extend-exclude")
_BOOL_KEYS = ("force-exclude", "respect-gitignore", "unsafe-fixes", "cache")
_TABLE_KEYS = ("per-file-ignores", "extend-per-file-ignores")
_STR_KEYS = ("cache-dir", "output-format")
KNOWN_KEYS = frozenset(_LIST_KEYS + _BOOL_KEYS + _TABLE_KEYS + _STR_KEYS)
OUTPUT_FORMATS = ("concise", "full", "json", "json-lines", "github", "sarif", "junit", "gitlab")


@dataclass(frozen=True)
class Settings:
    root: Path
    config_path: Path | None = None
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    force_exclude: bool = False
    respect_gitignore: bool = True
    unsafe_fixes: bool = False
    cache: bool = True
    cache_dir: str | None = None
    output_format: str | None = None
    _rules: tuple[type[Rule], ...] | None = field(default=None, compare=False, repr=False)

    @property
    def rules(self) -> tuple[type[Rule], ...]:
        if self._rules is None:
            try:
                rules = tuple(resolve_rules(self.select, self.extend_select, self.ignore))
            except SelectorError as exc:
                where = f" in {self.config_path}" if self.config_path else ""
                raise ConfigError(f"{exc}{where}") from None
            object.__setattr__(self, "_rules", rules)
        return self._rules  # type: ignore[return-value]

    def rules_for(self, path: Path) -> tuple[type[Rule], ...]:
        ignored = self.ignored_codes(path)
        if not ignored:
            return self.rules
        return tuple(r for r in self.rules if not any(_selector_hits(s, r) for s in ignored))

    def ignored_codes(self, path: Path) -> list[str]:
        codes: list[str] = []
        for pattern, selectors in self.per_file_ignores:
            negate = pattern.startswith("!")
            matched = path_matches(path, pattern[1:] if negate else pattern, self.root)
            if matched != negate:
                codes.extend(selectors)
        return codes

    def is_excluded(self, path: Path, all_components: bool = False) -> bool:
        """Excluded by `exclude` / `extend-exclude`? During a walk each directory is checked
        as it is entered, so a bare name is only matched against the entry itself; for files
        given by name with --force-exclude, every component counts."""
        patterns = self.exclude + self.extend_exclude
        return any(path_matches(path, p, self.root, all_components) for p in patterns)

    def key(self) -> str:
        """A stable description of everything that changes results (for the cache)."""
        return repr((sorted(r.code for r in self.rules), self.per_file_ignores))


def _selector_hits(selector: str, rule: type[Rule]) -> bool:
    return selector == "ALL" or rule.code.startswith(selector) or selector == rule.name


def path_matches(path: Path, pattern: str, root: Path, all_components: bool = True) -> bool:
    """ruff-style matching: a bare name matches the file or directory name (or, with
    `all_components`, any component of the path); a pattern with a slash matches the path
    relative to `root` (with `**`)."""
    pattern = pattern.rstrip("/")
    if "/" not in pattern:
        if fnmatch.fnmatchcase(path.name, pattern):
            return True
        return all_components and any(fnmatch.fnmatchcase(part, pattern) for part in _parts_below(path, root))
    try:
        rel = Path(os.path.abspath(path)).relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = path.as_posix()
    pattern = pattern.lstrip("./") if pattern.startswith("./") else pattern
    if fnmatch.fnmatchcase(rel, pattern):
        return True
    if "**" in pattern:
        return fnmatch.fnmatchcase(rel, pattern.replace("**/", "")) or fnmatch.fnmatchcase(
            rel, pattern.replace("/**", "/*")
        )
    # a directory pattern matches everything below it
    return rel.startswith(pattern + "/")


def _parts_below(path: Path, root: Path) -> tuple[str, ...]:
    """The components of `path` below the project root (a `build` directory above the
    project must not exclude it); all of them when the path is outside the root."""
    try:
        return Path(os.path.abspath(path)).relative_to(root.resolve()).parts
    except ValueError:
        return path.parts


@dataclass(frozen=True)
class Overrides:
    """Options given on the command line; None means "not given"."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    force_exclude: bool | None = None
    respect_gitignore: bool | None = None
    unsafe_fixes: bool | None = None
    cache: bool | None = None
    cache_dir: str | None = None
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def apply(self, settings: Settings) -> Settings:
        changes: dict[str, Any] = {}
        if self.select is not None:
            changes["select"] = self.select
            changes["extend_select"] = self.extend_select
        elif self.extend_select:
            changes["extend_select"] = settings.extend_select + self.extend_select
        if self.ignore:
            changes["ignore"] = settings.ignore + self.ignore
        if self.exclude is not None:
            changes["exclude"] = self.exclude
        if self.extend_exclude:
            changes["extend_exclude"] = settings.extend_exclude + self.extend_exclude
        if self.per_file_ignores:
            changes["per_file_ignores"] = settings.per_file_ignores + self.per_file_ignores
        for name in ("force_exclude", "respect_gitignore", "unsafe_fixes", "cache", "cache_dir"):
            value = getattr(self, name)
            if value is not None:
                changes[name] = value
        if not changes:
            return settings
        changes["_rules"] = None
        return replace(settings, **changes)


def _string_list(value: Any, key: str, problems: list[str]) -> tuple[str, ...] | None:
    if isinstance(value, str) or not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(f"`{key}` must be a list of strings")
        return None
    return tuple(value)


def _codes(value: Any, key: str, problems: list[str]) -> tuple[str, ...] | None:
    items = _string_list(value, key, problems)
    if items is None:
        return None
    return tuple(validate_selectors(items, problems, f"`{key}`"))


def unknown_key(key: str, known: Iterable[str] = KNOWN_KEYS) -> str:
    """`unknown key `selct` (did you mean `select`?)`; the known keys when none is close."""
    guess = difflib.get_close_matches(key.replace("_", "-"), sorted(known), n=1, cutoff=0.6)
    if guess:
        return f"unknown key `{key}` (did you mean `{guess[0]}`?)"
    return f"unknown key `{key}` (known keys: {', '.join(sorted(known))})"


def config_problems(config_path: Path, problems: list[str]) -> ConfigError:
    """One error for every problem of a file: one line each, so that a user fixes them all in
    one go rather than one per run."""
    if len(problems) == 1:
        return ConfigError(f"{problems[0]} in [tool.perflint] ({config_path})")
    lines = "".join(f"\n  - {problem}" for problem in problems)
    return ConfigError(f"{len(problems)} problems in [tool.perflint] ({config_path}):{lines}")


def load_settings(config_path: Path, table: dict[str, Any]) -> Settings:
    """Settings from a [tool.perflint] table; every problem in it is reported at once."""
    problems = [unknown_key(key) for key in table if key not in KNOWN_KEYS]  # every problem, not the first
    values: dict[str, Any] = {"root": config_path.parent, "config_path": config_path}
    for key in ("select", "extend-select", "ignore"):
        if key in table:
            values[key.replace("-", "_")] = _codes(table[key], key, problems)
    for key in ("exclude", "extend-exclude"):
        if key in table:
            values[key.replace("-", "_")] = _string_list(table[key], key, problems)
    for key in _BOOL_KEYS:
        if key in table:
            if not isinstance(table[key], bool):
                problems.append(f"`{key}` must be true or false")
            values[key.replace("-", "_")] = table[key]
    for key in _STR_KEYS:
        if key in table:
            if not isinstance(table[key], str):
                problems.append(f"`{key}` must be a string")
            values[key.replace("-", "_")] = table[key]
    if isinstance(values.get("output_format"), str) and values["output_format"] not in OUTPUT_FORMATS:
        guess = difflib.get_close_matches(values["output_format"], OUTPUT_FORMATS, n=1, cutoff=0.6)
        hint = f" (did you mean `{guess[0]}`?)" if guess else f" (one of: {', '.join(OUTPUT_FORMATS)})"
        problems.append(f"unknown output-format `{values['output_format']}`{hint}")
    pfi: list[tuple[str, tuple[str, ...]]] = []
    for key in _TABLE_KEYS:
        if key in table:
            raw = table[key]
            if not isinstance(raw, dict):
                problems.append(f"`{key}` must be a table of glob = [codes]")
                continue
            for pattern, codes in raw.items():
                pfi.append((pattern, _codes(codes, f"{key}.{pattern}", problems) or ()))
    if problems:
        raise config_problems(config_path, problems)
    if pfi:
        values["per_file_ignores"] = tuple(pfi)
    settings = Settings(**values)
    settings.rules  # validate now: a bad code is a config error, not a crash later
    return settings


def read_pyproject(path: Path, warnings: list[str] | None = None) -> dict[str, Any] | None:
    """The [tool.perflint] table of a pyproject.toml, or None when it has none.

    A file that is not valid TOML is an error (as in ruff), except where `warnings` is given
    and the file does not even mention perflint: it cannot hold our settings, so it is
    ignored with a warning (ruff stops there, whatever the file is for)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        if warnings is not None and b"perflint" not in raw.lower():
            warnings.append(f"cannot parse {path} ({exc}); ignored: it does not mention perflint, "
                            "so it has no [tool.perflint] table")
            return None
        raise ConfigError(f"cannot parse {path}: {exc}") from None
    tool = data.get("tool", {})
    table = tool.get("perflint") if isinstance(tool, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"[tool.perflint] in {path} must be a table")
    return table


def check_overrides(overrides: Overrides) -> None:
    """Every unknown selector given on the command line, at once."""
    problems: list[str] = []
    validate_selectors(overrides.select or (), problems, "--select")
    validate_selectors(overrides.extend_select, problems, "--extend-select")
    validate_selectors(overrides.ignore, problems, "--ignore")
    for pattern, codes in overrides.per_file_ignores:
        validate_selectors(codes, problems, f"--per-file-ignores {pattern}")
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(f"{len(problems)} problems in the options:" + "".join(f"\n  - {p}" for p in problems))


class SettingsResolver:
    """Finds the settings for any path: nearest [tool.perflint], cached per directory."""

    def __init__(self, cwd: Path, overrides: Overrides | None = None, config: Path | None = None) -> None:
        self.cwd = cwd.resolve()
        self.overrides = overrides or Overrides()
        self.warnings: list[str] = []  # for the user, once each (broken files ignored, ...)
        self._tables: dict[Path, dict[str, Any] | None] = {}
        check_overrides(self.overrides)
        self._by_dir: dict[Path, Settings] = {}
        self._forced: Settings | None = None
        if config is not None:
            table = read_pyproject(config)
            base = load_settings(config.resolve(), table or {}) if table is not None else Settings(root=config.resolve().parent, config_path=config.resolve())
            self._forced = self.overrides.apply(base)
        self.default = self.overrides.apply(self._nearest(self.cwd) or Settings(root=self.cwd))
        self.default.rules  # validate CLI selectors early

    def _nearest(self, directory: Path) -> Settings | None:
        for parent in [directory, *directory.parents]:
            candidate = parent / "pyproject.toml"
            if _is_file(candidate):
                table = self._table(candidate)
                if table is not None:
                    return load_settings(candidate, table)
        return None

    def _table(self, candidate: Path) -> dict[str, Any] | None:
        """A discovered pyproject.toml's [tool.perflint], each file read once."""
        if candidate not in self._tables:
            self._tables[candidate] = read_pyproject(candidate, self.warnings)
        return self._tables[candidate]

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def for_path(self, path: Path) -> Settings:
        if self._forced is not None:
            return self._forced
        directory = path if _is_dir(path) else path.parent
        try:
            directory = directory.resolve()
        except OSError:
            return self.default
        cached = self._by_dir.get(directory)
        if cached is not None:
            return cached
        found = self._nearest_cached(directory)
        self._by_dir[directory] = found
        return found

    def _nearest_cached(self, directory: Path) -> Settings:
        chain: list[Path] = []
        current = directory
        while True:
            if current in self._by_dir:
                result = self._by_dir[current]
                break
            chain.append(current)
            candidate = current / "pyproject.toml"
            table = self._table(candidate) if _is_file(candidate) else None
            if table is not None:
                result = self.overrides.apply(load_settings(candidate, table))
                break
            if current.parent == current:
                result = self.default
                break
            current = current.parent
        for d in chain:
            self._by_dir[d] = result
        return result

    def all_settings(self) -> Iterable[Settings]:
        seen = {id(self.default): self.default}
        for s in self._by_dir.values():
            seen.setdefault(id(s), s)
        return seen.values()


def _is_file(path: Path) -> bool:
    """`path.is_file()`, False where its directory cannot be searched (no permission)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes", "on")

"""`--show-settings` and `--show-files`: what perflint would do, printed for humans (the
settings as TOML you can paste into `[tool.perflint]`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .config import Settings, SettingsResolver, path_matches
from .files import MissingPath, Target, _gitignored, _GitIgnore, discover


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def _excluded_because(path: Path, settings: Settings) -> str | None:
    for pattern in settings.exclude + settings.extend_exclude:
        if path_matches(path, pattern, settings.root, True):
            return f"matches exclude pattern `{pattern}`"
    if settings.respect_gitignore and path.is_file() and _gitignored(_GitIgnore(), path, settings):
        return "ignored by .gitignore"
    return None


def settings_text(path: Path, resolver: SettingsResolver, force_exclude: bool | None) -> str:
    lookup = path / "__init__.py" if path.is_dir() else path
    settings = resolver.for_path(lookup)
    rules = settings.rules_for(path) if not path.is_dir() else settings.rules
    forced = settings.force_exclude if force_exclude is None else force_exclude
    lines = [
        f"Resolved settings for: {json.dumps(str(path))}",
        f"Settings path: {json.dumps(str(settings.config_path)) if settings.config_path else 'none (built-in defaults)'}",
        f"Project root: {json.dumps(str(settings.root))}",
    ]
    why = _excluded_because(path, settings)
    if why:
        state = "skipped" if forced or not path.is_file() else "checked when given by name (no --force-exclude)"
        lines.append(f"Excluded: yes, {why}; {state}")
    else:
        lines.append("Excluded: no")
    lines += [
        "",
        "[tool.perflint]",
        (f"select = {_toml(list(settings.select))}" if settings.select is not None
         else "# select is not set: the rules enabled by default run"),
        f"extend-select = {_toml(list(settings.extend_select))}",
        f"ignore = {_toml(list(settings.ignore))}",
        f"exclude = {_toml(list(settings.exclude))}",
        f"extend-exclude = {_toml(list(settings.extend_exclude))}",
        f"force-exclude = {_toml(forced)}",
        f"respect-gitignore = {_toml(settings.respect_gitignore)}",
        f"unsafe-fixes = {_toml(settings.unsafe_fixes)}",
        f"cache = {_toml(settings.cache)}",
    ]
    if settings.cache_dir:
        lines.append(f"cache-dir = {_toml(settings.cache_dir)}")
    if settings.output_format:
        lines.append(f"output-format = {_toml(settings.output_format)}")
    lines.append("")
    lines.append("[tool.perflint.per-file-ignores]")
    for pattern, codes in settings.per_file_ignores:
        lines.append(f"{json.dumps(pattern)} = {_toml(list(codes))}")
    lines.append("")
    where = "this file" if not path.is_dir() else "files here (before per-file-ignores)"
    lines.append(f"# Rules enabled for {where} ({len(rules)})")
    lines += [f"# {rule.code} {rule.name}" for rule in rules]
    return "\n".join(lines) + "\n"


def files_text(paths: list[Path], resolver: SettingsResolver,
               force_exclude: bool | None) -> tuple[str, bool, list[str]]:
    """The files that would be checked, one per line (sorted), whether a path was missing,
    and a warning per directory that cannot be listed (`check` reports it as PFL001)."""
    found: list[str] = []
    warnings: list[str] = []
    missing = False
    for item in discover(paths, resolver, force_exclude):
        if isinstance(item, MissingPath):
            missing = True
            continue
        assert isinstance(item, Target)
        shown = os.path.relpath(item.path) if not item.path.is_absolute() else str(item.path)
        if item.error is not None:
            warnings.append(f"{shown}: {item.error}; none of them is checked")
            continue
        found.append(shown)
    return "".join(f"{f}\n" for f in sorted(found)), missing, warnings

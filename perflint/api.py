"""The library API; the CLI is a thin layer over it.

    from perflint.api import check_source, check_paths, fix_source
    diagnostics = check_source(code, "train.py")
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from .cache import Cache
from .config import Overrides, Settings, SettingsResolver
from .engine import FileResult, linter_for
from .fileio import ChangedOnDisk, read_error, write_atomic
from .files import MissingPath, Target, discover
from .fixes import FixOutcome, applicable, fix_text
from .notebook import fix_notebook, is_notebook, lint_notebook
from .project import project_roots
from .runner import display_path, lint_project, run_targets
from .rule import FileError
from .source import DecodeFailure, SourceFile
from .types import Diagnostic
from .wrap import line_length_for

__all__ = [
    "CheckReport", "FileFix", "FixReport", "check_paths", "check_source", "fix_paths", "fix_source",
    "hot_seeds_for", "iter_targets", "linter_for", "project_targets", "ProjectRun", "run_project",
]


# --------------------------------------------------------------------------- checking
def check_source(
    text: str,
    path: str = "<stdin>",
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] = (),
    extend_select: Sequence[str] = (),
    settings: Settings | None = None,
) -> list[Diagnostic]:
    """Lint Python source text; `path` is used for messages and per-file-ignores."""
    if settings is None:
        overrides = Overrides(select=tuple(select) if select is not None else None,
                              ignore=tuple(ignore), extend_select=tuple(extend_select))
        settings = overrides.apply(Settings(root=Path.cwd()))
    rules = settings.rules_for(Path(path))
    source = SourceFile(path=path, text=text)
    return linter_for(rules).lint_source(source).diagnostics


def read_source(path: Path, display: str) -> SourceFile | FileError:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return FileError(read_error(path, exc))
    try:
        return SourceFile.from_bytes(display, raw)
    except DecodeFailure as exc:
        return FileError(f"cannot decode file: {exc}")


def lint_target(target: Target, cwd: Path, raw: bytes | None = None,
                hot_functions: frozenset[str] = frozenset()) -> FileResult:
    """Lint one discovered file; `raw` is its content when the caller already read it;
    `hot_functions` are its functions that other files call every step."""
    display = display_path(target.path, cwd)
    linter = linter_for(target.settings.rules_for(target.path))
    if target.error is not None:  # a directory that cannot be listed
        return linter._error_result(display, FileError(target.error, subject="directory"))
    if raw is None:
        try:
            raw = target.path.read_bytes()
        except OSError as exc:
            return linter._error_result(display, FileError(read_error(target.path, exc)))
    if is_notebook(target.path):
        return lint_notebook(linter, display, raw, hot_functions)
    return linter.lint_bytes(display, raw, hot_functions)


@dataclass
class CheckReport:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: int = 0
    missing: list[MissingPath] = field(default_factory=list)
    file_errors: int = 0

    def add(self, result: FileResult) -> None:
        self.files += 1
        self.diagnostics.extend(result.diagnostics)
        if result.error:
            self.file_errors += 1


def iter_targets(paths: Iterable[Path], resolver: SettingsResolver,
                 force_exclude: bool | None = None) -> tuple[list[Target], list[MissingPath]]:
    targets: list[Target] = []
    missing: list[MissingPath] = []
    for item in discover(list(paths), resolver, force_exclude):
        (targets if isinstance(item, Target) else missing).append(item)  # type: ignore[arg-type]
    return targets, missing


def project_targets(targets: Sequence[Target], paths: Sequence[Path], resolver: SettingsResolver,
                    project_root: Path | None = None) -> list[Target]:
    """The named targets first, then every other Python file of their projects (excludes
    and `.gitignore` respected): what the analysis reads for summaries."""
    roots = project_roots(paths, project_root)
    if not roots:
        return list(targets)
    known = {os.path.abspath(t.path) for t in targets}
    # the named directories were walked already (with no fewer files: their walk reads the
    # .gitignore files from there down, this one from the root)
    walked = frozenset(os.path.abspath(p) for p in paths if p.is_dir())
    extra: list[Target] = []
    for item in discover(list(roots), resolver, force_exclude=True, lenient=True, skip=walked):
        if isinstance(item, Target):
            key = os.path.abspath(item.path)
            if key not in known:
                known.add(key)
                extra.append(item)
    return list(targets) + extra


@dataclass
class ProjectRun:
    """The named targets' results (and hot seeds), after analyzing their whole project."""

    targets: list[Target]
    missing: list[MissingPath]
    results: list[FileResult]
    hot: list[frozenset[str]]  # per named target: its functions other files call every step


def run_project(paths: Sequence[Path], resolver: SettingsResolver, *, force_exclude: bool | None = None,
                jobs: int | None = None, cache: Cache | None = None, project: bool = True,
                project_root: Path | None = None) -> ProjectRun:
    """Analyze the named files with the rest of their project (`project=False`: the named
    files alone) and return the named files' results."""
    cwd = Path.cwd()
    targets, missing = iter_targets(paths, resolver, force_exclude)
    everything = project_targets(targets, paths, resolver, project_root) if project else targets
    lint = lambda target, display, raw, hot: lint_target(target, cwd, raw, hot)  # noqa: E731
    done = lint_project(everything, cwd, lint, jobs=jobs, cache=cache)
    named = range(len(targets))
    return ProjectRun(targets, missing, done.results[:len(targets)], [done.hot.get(i, frozenset()) for i in named])


def hot_seeds_for(path: Path, resolver: SettingsResolver, *, jobs: int | None = None, cache: Cache | None = None,
                  project_root: Path | None = None) -> frozenset[str]:
    """The functions of `path` that other files of its project call every step: for text
    that is not on disk yet (stdin with `--stdin-filename`), analyzed as if it were `path`."""
    target = Target(path, resolver.for_path(path), explicit=True)
    everything = project_targets([target], [path], resolver, project_root)
    if len(everything) == 1:
        return frozenset()
    cwd = Path.cwd()
    lint = lambda target, display, raw, hot: lint_target(target, cwd, raw, hot)  # noqa: E731
    return lint_project(everything, cwd, lint, jobs=jobs, cache=cache).hot.get(0, frozenset())


def check_paths(
    paths: Sequence[Path],
    resolver: SettingsResolver | None = None,
    *,
    force_exclude: bool | None = None,
    jobs: int | None = None,
    cache: Cache | None = None,
    project: bool = True,
    project_root: Path | None = None,
) -> CheckReport:
    """Lint every file below `paths`: unchanged files from `cache`, the others in `jobs`
    processes (None: one per CPU; 1: in this process). The other files of their project are
    read too (what they call every step decides what is hot here) but not reported."""
    resolver = resolver or SettingsResolver(Path.cwd())
    run = run_project(paths, resolver, force_exclude=force_exclude, jobs=jobs, cache=cache,
                      project=project, project_root=project_root)
    report = CheckReport(missing=run.missing)
    for result in run.results:
        report.add(result)
    report.diagnostics.sort(key=Diagnostic.sort_key)
    return report


# --------------------------------------------------------------------------- fixing
def fix_source(
    text: str,
    path: str = "<stdin>",
    *,
    unsafe: bool = False,
    settings: Settings | None = None,
    select: Sequence[str] | None = None,
    hot_functions: frozenset[str] = frozenset(),
    line_length: int | None = None,
) -> FixOutcome:
    """Fix Python source text; `hot_functions` are its functions other files call every step.
    Fixed lines are kept within `line_length` (default: the line length configured for
    `path`'s project, as ruff or black has it, else 88; 0: no limit)."""
    if settings is None:
        settings = Overrides(select=tuple(select) if select is not None else None).apply(Settings(root=Path.cwd()))
    linter = linter_for(settings.rules_for(Path(path)))
    source = SourceFile(path=path, text=text)

    def lint(src: SourceFile) -> list[Diagnostic]:
        return linter.lint_source(src, hot_functions).diagnostics

    if line_length is None:
        line_length = line_length_for(Path(path))
    return fix_text(source, lint, unsafe, lambda new: SourceFile(path=path, text=new), line_length)


def fix_file_source(source: SourceFile, settings: Settings, path: Path, unsafe: bool,
                    hot_functions: frozenset[str] = frozenset()) -> FixOutcome:
    linter = linter_for(settings.rules_for(path))

    def lint(src: SourceFile) -> list[Diagnostic]:
        return linter.lint_source(src, hot_functions).diagnostics

    def make(new: str) -> SourceFile:
        return SourceFile(path=source.path, text=new, encoding=source.encoding, bom=source.bom)

    return fix_text(source, lint, unsafe, make, line_length_for(path))


@dataclass
class FileFix:
    path: Path
    display: str
    original: str
    fixed_text: str
    fixed: list[Diagnostic]
    remaining: list[Diagnostic]
    dropped: list[tuple[Diagnostic, str]]
    write_error: str | None = None
    diff_text: str | None = None  # notebooks: per-cell diffs (`original`/`fixed_text` are JSON)
    write_failed: bool = False  # the file could not be written (not: it changed on disk meanwhile)

    @property
    def changed(self) -> bool:
        return self.fixed_text != self.original


@dataclass
class FixReport(CheckReport):
    files_fixed: list[FileFix] = field(default_factory=list)

    @property
    def fixed(self) -> list[Diagnostic]:
        return [d for f in self.files_fixed for d in f.fixed]


def fix_paths(
    paths: Sequence[Path],
    resolver: SettingsResolver,
    *,
    unsafe: bool | None = None,
    write: bool = True,
    force_exclude: bool | None = None,
    jobs: int | None = None,
    cache: Cache | None = None,
    project: bool = True,
    project_root: Path | None = None,
) -> FixReport:
    """Fix every target; write changed files (atomically) unless `write` is False.

    Everything is checked first, with the rest of the project (the cache serves unchanged
    files; the project pass finds the functions other files call every step); only named
    files with an applicable fix are then fixed, in `jobs` processes, each write atomic."""
    cwd = Path.cwd()
    run = run_project(paths, resolver, force_exclude=force_exclude, jobs=jobs, cache=cache,
                      project=project, project_root=project_root)
    targets = run.targets
    report = FixReport(missing=run.missing)

    def allow_unsafe_for(target: Target) -> bool:
        return target.settings.unsafe_fixes if unsafe is None else unsafe

    to_fix: list[int] = []
    for index, (target, result) in enumerate(zip(targets, run.results)):
        if result.error is None and any(applicable(d, allow_unsafe_for(target)) for d in result.diagnostics):
            to_fix.append(index)
        else:
            report.add(result)
    seeds = {id(targets[i]): run.hot[i] for i in to_fix}

    def fix_target(target: Target, display: str) -> tuple[FileResult | FileFix, None]:
        allow_unsafe = allow_unsafe_for(target)
        try:
            raw = target.path.read_bytes()
        except OSError:
            return lint_target(target, cwd), None
        if is_notebook(target.path):
            return _fix_notebook_target(target, display, raw, allow_unsafe, write), None
        try:
            source = SourceFile.from_bytes(display, raw)
        except DecodeFailure:
            return lint_target(target, cwd), None
        hot_here = seeds.get(id(target), frozenset())
        outcome = fix_file_source(source, target.settings, target.path, allow_unsafe, hot_here)
        file_fix = FileFix(target.path, display, source.text, outcome.text, outcome.fixed,
                           outcome.remaining, outcome.dropped)
        if file_fix.changed and write:
            try:
                write_atomic(target.path, source.to_bytes(outcome.text), raw)
            except (ChangedOnDisk, OSError) as exc:
                file_fix.write_error = str(exc)
                file_fix.write_failed = isinstance(exc, OSError)
                linter = linter_for(target.settings.rules_for(target.path))
                file_fix.remaining = linter.lint_source(source, hot_here).diagnostics
                file_fix.fixed = []
        return file_fix, None

    for done in run_targets([targets[i] for i in to_fix], cwd, fix_target, jobs=jobs, cache=None):
        if isinstance(done, FileResult):
            report.add(done)
            continue
        file_fix = done
        report.files += 1
        report.diagnostics.extend(file_fix.remaining)
        if file_fix.fixed or file_fix.dropped or file_fix.write_error:
            report.files_fixed.append(file_fix)
    report.diagnostics.sort(key=Diagnostic.sort_key)
    return report


def _fix_notebook_target(target: Target, display: str, raw: bytes, unsafe: bool,
                         write: bool) -> FileResult | FileFix:
    linter = linter_for(target.settings.rules_for(target.path))
    result = fix_notebook(linter, display, raw, unsafe, line_length_for(target.path))
    if isinstance(result, FileResult):  # cannot be analyzed: nothing to fix
        return result
    outcome = result.outcome
    text = raw.decode("utf-8", "replace")
    new_text = result.new_raw.decode("utf-8") if result.new_raw is not None else text
    file_fix = FileFix(target.path, display, text, new_text, outcome.fixed, outcome.remaining,
                       outcome.dropped, write_error=result.error, diff_text=result.diff)
    if result.new_raw is not None and write:
        try:
            write_atomic(target.path, result.new_raw, raw)
        except (ChangedOnDisk, OSError) as exc:
            file_fix.write_error = str(exc)
            file_fix.write_failed = isinstance(exc, OSError)
            file_fix.remaining = lint_notebook(linter, display, raw).diagnostics
            file_fix.fixed = []
    return file_fix

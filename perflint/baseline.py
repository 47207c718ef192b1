"""`perflint check --add-noqa`: a baseline that suppresses every current finding where it is
reported, so a large codebase can adopt perflint and fail only on new findings.

The files are analyzed with the rest of their project, as `check` does: a helper that is
hot only through a caller in another file gets its comment too."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from .api import linter_for, run_project
from .cache import Cache
from .config import SettingsResolver
from .fileio import ChangedOnDisk, write_atomic
from .fixes import apply_edits, compiles
from .noqa_tools import plan_add_noqa
from .notebook import Notebook, NotebookError, _without_broken_cells, is_notebook
from .notebook import apply_edits as apply_notebook_edits
from .runner import display_path
from .source import DecodeFailure, SourceFile

# Findings a noqa comment cannot or should not hide: unreadable files have no lines, and a
# stale-suppression finding is fixed by `perflint fix --select PFL002`, not suppressed.
_NOT_BASELINED = frozenset({"PFL001", "PFL002"})


@dataclass
class AddNoqaResult:
    added: int = 0
    files: int = 0  # files changed
    missing: list = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _codes_by_row(diagnostics: Iterable) -> dict[int, set[str]]:
    rows: dict[int, set[str]] = {}
    for d in diagnostics:
        if d.code in _NOT_BASELINED:
            continue
        rows.setdefault(d.noqa_row or d.location.row, set()).add(d.code)
    return rows


def add_noqa_to_paths(paths: Sequence[Path], resolver: SettingsResolver, *, force_exclude: bool | None = None,
                      jobs: int | None = None, cache: Cache | None = None, project: bool = True,
                      project_root: Path | None = None) -> AddNoqaResult:
    """Suppress every current finding of the named files where it is reported."""
    result = AddNoqaResult()
    run = run_project(paths, resolver, force_exclude=force_exclude, jobs=jobs, cache=cache,
                      project=project, project_root=project_root)
    result.missing = run.missing
    cwd = Path.cwd()
    for target, seeds in zip(run.targets, run.hot):
        display = display_path(target.path, cwd)
        linter = linter_for(target.settings.rules_for(target.path))
        try:
            raw = target.path.read_bytes()
        except OSError as exc:
            result.warnings.append(f"{display}: cannot read file: {exc.strerror}")
            continue
        try:
            if is_notebook(target.path):
                notebook = Notebook.from_bytes(raw)
                if not notebook.python or not notebook.cells:
                    continue
                notebook, _errors = _without_broken_cells(linter, display, notebook)
                text = notebook.text
            else:
                source = SourceFile.from_bytes(display, raw)
                text = source.text
        except (NotebookError, DecodeFailure):
            continue  # reported as cannot-analyze by `check`; nothing to suppress
        lint = linter.lint_source(SourceFile(path=display, text=text), seeds)
        if not lint.parsed:
            continue
        plan = plan_add_noqa(text, _codes_by_row(lint.diagnostics))
        for row, why in plan.skipped:
            result.warnings.append(f"{display}:{row}: no noqa added: {why}")
        if not plan.edits:
            continue
        new_text = apply_edits(text, plan.edits)
        if not compiles(new_text, display):  # pragma: no cover - comments cannot break code
            result.warnings.append(f"{display}: adding noqa comments would break the file; left alone")
            continue
        if is_notebook(target.path):
            try:
                new_raw = apply_notebook_edits(notebook, plan.edits)[0].encode("utf-8")
            except NotebookError as exc:
                result.warnings.append(f"{display}: {exc.message}")
                continue
        else:
            new_raw = source.to_bytes(new_text)
        try:
            write_atomic(target.path, new_raw, raw)
        except (ChangedOnDisk, OSError) as exc:
            result.warnings.append(str(exc))
            continue
        result.added += plan.added
        result.files += 1
    return result

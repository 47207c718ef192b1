"""Writing small multi-file projects for tests: one helper, shared by the tests that need it."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_project(root: Path, files: dict[str, str]) -> None:
    """Write each `relative path -> source` (dedented, leading newline dropped), making the
    folders on the way."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def project_findings(tmp_path: Path, files: dict[str, str]) -> set[tuple[str, int, str]]:
    """(file name, line, code) of each finding of `perflint check` over a project of `files`
    (with a `pyproject.toml`, written under `tmp_path/proj`), without a cache."""
    from perflint.api import check_paths
    from perflint.config import SettingsResolver

    root = tmp_path / "proj"
    write_project(root, {"pyproject.toml": "", **files})
    report = check_paths([root], SettingsResolver(root), jobs=1, cache=None)
    return {(d.path.rsplit("/", 1)[-1], d.location.row, d.code) for d in report.diagnostics}

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

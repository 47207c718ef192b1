"""What formatters may know besides the diagnostics: the source lines (for snippets and
fingerprints), where a notebook finding lies in the stored JSON, and the project root.

Formatters stay pure functions of (diagnostics, context); the context reads files lazily
and caches them, and tests give it the texts directly.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Callable, Sequence
from urllib.parse import quote

from .. import __version__
from ..types import Diagnostic, Location
from ..notebook import Notebook, NotebookError
from ..source import DecodeFailure, SourceFile

INFORMATION_URI = "https://github.com/perflint/perflint"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class Sources:
    """File texts by display path, read on first use through `read` (None: unavailable)."""

    def __init__(self, read: Callable[[str], bytes | None]) -> None:
        self._read = read
        self._texts: dict[str, str | None] = {}
        self._notebooks: dict[str, object] = {}

    @classmethod
    def from_disk(cls, base: Path | None = None) -> Sources:
        def read(path: str) -> bytes | None:
            try:
                return ((base or Path.cwd()) / path).read_bytes()
            except OSError:
                return None

        return cls(read)

    @classmethod
    def from_texts(cls, texts: dict[str, str]) -> Sources:
        return cls(lambda path: texts[path].encode("utf-8") if path in texts else None)

    def add(self, path: str, text: str) -> None:
        self._texts[path] = text

    def text(self, path: str) -> str | None:
        """The file as stored (a notebook's JSON), decoded."""
        if path not in self._texts:
            data = self._read(path)
            text: str | None = None
            if data is not None:
                try:
                    text = data.decode("utf-8") if path.endswith(".ipynb") else SourceFile.from_bytes(path, data).text
                except (DecodeFailure, UnicodeDecodeError):
                    text = None
            self._texts[path] = text
        return self._texts[path]

    def _notebook(self, path: str):
        if path not in self._notebooks:
            text = self.text(path)
            try:
                self._notebooks[path] = Notebook.from_text(text) if text is not None else None
            except NotebookError:
                self._notebooks[path] = None
        return self._notebooks[path]

    def lines(self, path: str, cell: int | None = None) -> list[str] | None:
        """The lines a diagnostic's rows count (a notebook cell's lines for `cell`)."""
        if cell is not None:
            notebook = self._notebook(path)
            return notebook.cell_lines(cell) if notebook is not None else None
        text = self.text(path)
        return _LINE_BREAK.split(text) if text is not None else None

    def line(self, path: str, row: int, cell: int | None = None) -> str | None:
        lines = self.lines(path, cell)
        if lines is None or not 1 <= row <= len(lines):
            return None
        return lines[row - 1]

    def file_position(self, path: str, cell: int, location: Location) -> tuple[int, int] | None:
        """(line, column) in the stored notebook JSON of a cell-relative location."""
        notebook = self._notebook(path)
        if notebook is None:
            return None
        return notebook.file_position(cell, location.row, location.column)


@dataclass
class ReportContext:
    sources: Sources = field(default_factory=lambda: Sources(lambda _path: None))
    root: PurePath | None = None  # paths in SARIF / GitLab reports are relative to it
    version: str = __version__
    cwd: PurePath | None = None  # what relative display paths are relative to (default: root)

    # ----------------------------------------------------------------- paths
    def absolute_path(self, path: str) -> PurePath:
        pure = PurePath(path)
        base = self.cwd or self.root
        return pure if pure.is_absolute() or base is None else base / pure

    def relative_path(self, path: str) -> str:
        """The path relative to the root, with forward slashes (as given when outside it)."""
        if self.root is None:
            return PurePath(path).as_posix()
        absolute = self.absolute_path(path)
        try:
            return absolute.relative_to(self.root).as_posix()
        except ValueError:
            return absolute.as_posix()

    def uri(self, path: str) -> tuple[str, str | None]:
        """(uri, uriBaseId) for SARIF: relative to %SRCROOT% when possible."""
        relative = self.relative_path(path)
        if PurePath(relative).is_absolute():
            return Path(relative).as_uri(), None
        return quote(relative, safe="/"), "%SRCROOT%"

    # ----------------------------------------------------------------- positions
    def stored_location(self, diagnostic: Diagnostic, location: Location) -> Location:
        """A location in the file as stored: for a notebook cell, the line of the JSON
        string that holds that source line (line 1 when the notebook cannot be read)."""
        if diagnostic.cell is None:
            return location
        found = self.sources.file_position(diagnostic.path, diagnostic.cell, location)
        return Location(*found) if found else Location(1, 1)

    def stored_region(self, diagnostic: Diagnostic, utf16: bool = False) -> tuple[Location, Location]:
        start = self.stored_location(diagnostic, diagnostic.location)
        end = self.stored_location(diagnostic, diagnostic.end_location)
        if utf16:
            start, end = self.utf16(diagnostic, start), self.utf16(diagnostic, end)
        return start, end

    def utf16(self, diagnostic: Diagnostic, location: Location) -> Location:
        """Convert a 1-based code-point column into SARIF's default UTF-16 column."""
        text = self.sources.text(diagnostic.path)
        if text is None:
            return location
        lines = _LINE_BREAK.split(text)
        if not 1 <= location.row <= len(lines):
            return location
        prefix = lines[location.row - 1][: location.column - 1]
        if prefix.isascii():
            return location
        return Location(location.row, len(prefix.encode("utf-16-le")) // 2 + 1)

    # ----------------------------------------------------------------- identity
    def fingerprints(self, diagnostics: Sequence[Diagnostic], with_path: bool) -> list[str]:
        """A 16-hex-digit hash of the code and the finding's line text (whitespace-insensitive,
        so findings keep their identity when lines move), then `:<occurrence>`."""
        seen: dict[tuple[str, str], int] = {}
        out = []
        for d in diagnostics:
            line = self.sources.line(d.path, d.location.row, d.cell)
            content = "".join((line if line is not None else d.message).split())
            parts = [d.code, content] + ([self.relative_path(d.path), str(d.cell or "")] if with_path else [])
            digest = hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:16]
            key = (d.path, digest)
            seen[key] = seen.get(key, 0) + 1
            out.append(f"{digest}:{seen[key]}")
        return out


def display_location(d: Diagnostic) -> str:
    """`path:row:col`, or `nb.ipynb:cell N:row:col` for notebooks (as ruff prints them)."""
    if d.cell is not None:
        return f"{d.path}:cell {d.cell}:{d.location.row}:{d.location.column}"
    return f"{d.path}:{d.location.row}:{d.location.column}"


def project_root(cwd: Path) -> Path:
    """The repository root (the nearest directory with `.git`), else `cwd`: code scanning
    and GitLab want paths relative to the repository, wherever perflint ran."""
    for directory in (cwd, *cwd.parents):
        if (directory / ".git").exists():
            return directory
    return cwd


def cwd_context(sources: Sources | None = None) -> ReportContext:
    cwd = Path(os.getcwd())
    return ReportContext(sources=sources or Sources.from_disk(), root=project_root(cwd), cwd=cwd)

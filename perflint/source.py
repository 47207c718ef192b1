"""Source text as the user wrote it: bytes, encoding, BOM, newlines, and position maps.

`ast` reports columns as UTF-8 byte offsets within a line; users (and ruff, SARIF, editors)
expect 1-based character columns. Edits are applied to the decoded text and written back
with the original encoding, BOM and line endings untouched.
"""

from __future__ import annotations

import ast
import codecs
import io
import re
import tokenize
from dataclasses import dataclass, field

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class DecodeFailure(Exception):
    """The file's bytes cannot be decoded as Python source."""


@dataclass
class SourceFile:
    path: str
    text: str
    encoding: str = "utf-8"
    bom: bool = False
    raw: bytes | None = None
    _line_starts: list[int] | None = field(default=None, repr=False)

    @classmethod
    def from_bytes(cls, path: str, raw: bytes) -> SourceFile:
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        except SyntaxError as exc:
            raise DecodeFailure(str(exc)) from None
        bom = raw.startswith(codecs.BOM_UTF8)
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise DecodeFailure(f"cannot decode as {encoding}: {exc}") from None
        if bom and encoding != "utf-8-sig" and text.startswith("\ufeff"):
            text = text[1:]  # utf-8-sig already dropped the BOM; a second U+FEFF is content
        return cls(path=path, text=text, encoding=encoding, bom=bom, raw=raw)

    def to_bytes(self, text: str | None = None) -> bytes:
        """Encode `text` (default: this file's text) the way the original was encoded."""
        body = self.text if text is None else text
        encoding = "utf-8" if self.encoding == "utf-8-sig" else self.encoding
        data = body.encode(encoding)
        return (codecs.BOM_UTF8 + data) if self.bom else data

    def parse(self) -> ast.Module:
        return ast.parse(self.text, filename=self.path, type_comments=False)

    # ----------------------------------------------------------------- positions
    @property
    def line_starts(self) -> list[int]:
        if self._line_starts is None:
            starts = [0]
            starts.extend(m.end() for m in _LINE_BREAK.finditer(self.text))
            self._line_starts = starts
        return self._line_starts

    def line_text(self, row: int) -> str:
        """Line `row` (1-based) without its line break."""
        starts = self.line_starts
        if row < 1 or row > len(starts):
            return ""
        start = starts[row - 1]
        end = starts[row] if row < len(starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def char_column(self, row: int, byte_col: int) -> int:
        """Convert an ast byte column to a 0-based character column."""
        line = self.line_text(row)
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def offset(self, row: int, char_col: int) -> int:
        starts = self.line_starts
        row = max(1, min(row, len(starts)))
        return starts[row - 1] + char_col

    def node_span(self, node: ast.AST) -> tuple[int, int, int, int]:
        """(row, col, end_row, end_col): 1-based rows, 0-based character columns."""
        row, end_row = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
        col = self.char_column(row, node.col_offset)  # type: ignore[attr-defined]
        end_col = self.char_column(end_row, node.end_col_offset or 0)  # type: ignore[attr-defined]
        return row, col, end_row, end_col

    def node_offsets(self, node: ast.AST) -> tuple[int, int]:
        row, col, end_row, end_col = self.node_span(node)
        return self.offset(row, col), self.offset(end_row, end_col)

    def segment(self, node: ast.AST) -> str:
        start, end = self.node_offsets(node)
        return self.text[start:end]

    def position_of(self, offset: int) -> tuple[int, int]:
        """(1-based row, 0-based character column) of a text offset."""
        import bisect

        starts = self.line_starts
        index = bisect.bisect_right(starts, offset) - 1
        return index + 1, offset - starts[index]

    def newline(self) -> str:
        match = _LINE_BREAK.search(self.text)
        return match.group(0) if match else "\n"

"""Jupyter notebooks: check the code cells as one module, write fixes back into the cells.

The code cells are concatenated (so a tensor made in one cell is known in the next), with
IPython syntax masked line for line: `%magic` and `!shell` lines become `pass`, `x = !cmd`
becomes `x = None`, `obj?` help lines become `pass`, and cells run by a non-Python cell magic
(`%%bash`, `%%writefile`, ...) are left out. Findings are mapped back to
`nb.ipynb:cell N:row:col`, N counting every cell (markdown too), as ruff does.

Fixes are written back by splicing new `source` arrays into the original JSON text, so
outputs, metadata, other cells, key order, indentation and the final newline stay
byte-for-byte what they were. Cell boundaries and masked lines are tracked through every
round of edits by offset, never guessed from a diff.
"""

from __future__ import annotations

import ast
import bisect
import difflib
import json
import re
import warnings
from dataclasses import dataclass, field, replace
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, missing from typeshed
from typing import Callable, Sequence

from .engine import FileResult, Linter
from .fixes import FixOutcome, fix_text
from .fixes import apply_edits as apply_text_edits
from .rule import FileError
from .source import SourceFile
from .types import HOT_PATH_KEY, Diagnostic, Edit, Fix, Location

SUFFIX = ".ipynb"
# Cell magics whose body is Python run in the kernel (ruff's list).
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "debug", "prun", "pypy", "python", "python3"})
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_ASSIGN_MAGIC = re.compile(r"^(\s*[\w.\[\], ()*]+?\s*=\s*)[%!]")
_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_HELP = re.compile(r"^\s*(\?{1,2}[\w.]+|[\w.]+(\(\))?\?{1,2})\s*$")


def split_lines(text: str) -> list[str]:
    """Lines with their breaks, counting only \\n, \\r\\n and \\r (as Python's tokenizer does)."""
    return _LINES.findall(text)


def is_notebook(path: object) -> bool:
    return str(path).endswith(SUFFIX)


class NotebookError(Exception):
    """Not a notebook we can analyze; `row`/`column` point into the JSON text."""

    def __init__(self, message: str, row: int = 1, column: int = 0) -> None:
        super().__init__(message)
        self.message, self.row, self.column = message, row, column


# --------------------------------------------------------------------------- JSON spans
@dataclass
class _SourceSpan:
    """Where a cell's `source` value lies in the JSON text."""

    start: int
    end: int
    is_list: bool
    items: list[tuple[int, int]] = field(default_factory=list)  # each string token (list form)


def _ws(text: str, i: int) -> int:
    return _WS.match(text, i).end()  # type: ignore[union-attr]


def _expect(text: str, i: int, char: str) -> int:
    if text[i : i + 1] != char:
        raise ValueError(f"expected {char!r} at offset {i}")
    return i + 1


def _scan_source(text: str, i: int) -> tuple[_SourceSpan | None, int]:
    """The span of a `source` value; None (and the value skipped) unless it is a string or
    a list of strings (the caller reports the bad type)."""
    start = i
    if text[i : i + 1] == '"':
        _, end = scanstring(text, i + 1, True)
        return _SourceSpan(start, end, False, [(start, end)]), end
    if text[i : i + 1] != "[":
        return None, _DECODER.raw_decode(text, i)[1]
    i = _ws(text, i + 1)
    items: list[tuple[int, int]] = []
    if text[i : i + 1] == "]":
        return _SourceSpan(start, i + 1, True, items), i + 1
    while True:
        if text[i : i + 1] != '"':
            return None, _DECODER.raw_decode(text, start)[1]
        _, end = scanstring(text, i + 1, True)
        items.append((i, end))
        i = _ws(text, end)
        if text[i : i + 1] == "]":
            return _SourceSpan(start, i + 1, True, items), i + 1
        i = _ws(text, _expect(text, i, ","))


def _scan_object(text: str, i: int, on_key: Callable[[str, int], int | None]) -> int:
    """Walk an object; `on_key(key, value_offset)` returns the value's end, or None to skip it."""
    i = _ws(text, _expect(text, i, "{"))
    if text[i : i + 1] == "}":
        return i + 1
    while True:
        key, i = scanstring(text, _expect(text, i, '"'), True)
        i = _ws(text, _expect(text, _ws(text, i), ":"))
        end = on_key(key, i)
        if end is None:
            end = _DECODER.raw_decode(text, i)[1]
        i = _ws(text, end)
        if text[i : i + 1] == "}":
            return i + 1
        i = _ws(text, _expect(text, i, ","))


def _scan_cells(text: str) -> list[_SourceSpan | None]:
    """The `source` span of every cell, in order (None for a cell without one)."""
    spans: list[_SourceSpan | None] = []

    def cell_key(key: str, at: int) -> int | None:
        if key != "source":
            return None
        span, end = _scan_source(text, at)
        current[0] = span
        return end

    current: list[_SourceSpan | None] = [None]

    def root_key(key: str, at: int) -> int | None:
        if key != "cells":
            return None
        spans.clear()
        i = _ws(text, _expect(text, at, "["))
        if text[i : i + 1] == "]":
            return i + 1
        while True:
            current[0] = None
            i = _ws(text, _scan_object(text, i, cell_key))
            spans.append(current[0])
            if text[i : i + 1] == "]":
                return i + 1
            i = _ws(text, _expect(text, i, ","))

    _scan_object(text, _ws(text, 1 if text.startswith("\ufeff") else 0), root_key)
    return spans


def _decoded_to_raw(token: str, index: int) -> int:
    """Offset in a JSON string token (with quotes) of decoded character `index`."""
    i, n = 1, 0
    while n < index and i < len(token) - 1:
        if token[i] == "\\":
            if token[i + 1] == "u":
                code = int(token[i + 2 : i + 6], 16)
                i += 6
                if 0xD800 <= code < 0xDC00 and token[i : i + 2] == "\\u":
                    i += 6  # a surrogate pair is one character
            else:
                i += 2
        else:
            i += 1
        n += 1
    return i


# --------------------------------------------------------------------------- masking
@dataclass
class _Mask:
    offset: int  # in the concatenated text
    masked: str  # what the analysis sees, with the line break
    original: str  # what the cell holds, with the line break


class _LineScanner:
    """Just enough of Python's tokenizer to tell where logical lines start: open strings,
    brackets and backslash continuations. A `%` inside a docstring is not a magic."""

    _PREFIX = re.compile(r"(?i)[rbuf]{0,2}('''|\"\"\"|'|\")")

    def __init__(self) -> None:
        self.quote: str | None = None
        self.depth = 0
        self.continued = False

    @property
    def at_statement_start(self) -> bool:
        return self.quote is None and self.depth == 0 and not self.continued

    def feed(self, line: str) -> None:
        i, n = 0, len(line)
        body = line.rstrip("\r\n")
        self.continued = False
        while i < n:
            if self.quote is not None:
                end = line.find(self.quote, i)
                while end > 0 and _escaped(line, end):
                    end = line.find(self.quote, end + 1)
                if end < 0:
                    if len(self.quote) == 1:
                        # A one-quote string only goes on with a backslash.
                        if body.endswith("\\"):
                            self.continued = True
                        else:
                            self.quote = None
                    return
                i = end + len(self.quote)
                self.quote = None
                continue
            char = line[i]
            if char == "#":
                return
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char.isalpha() or char == "_" or char in "'\"":
                # Whole identifiers are skipped, so a letter here starts one: a string
                # prefix (`rb"..."`) or a name.
                match = self._PREFIX.match(line, i)
                if match:
                    self.quote = match.group(1)
                    i = match.end()
                    continue
                start = i
                while i < n and (line[i].isalnum() or line[i] == "_"):
                    i += 1
                if i > start:
                    continue
            i += 1
        if body.endswith("\\") and self.quote is None:
            self.continued = True


def _escaped(line: str, index: int) -> bool:
    backslashes = 0
    while index - backslashes - 1 >= 0 and line[index - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def _cell_magic(lines: list[str]) -> str | None:
    """The `%%name` of a cell magic on the cell's first non-blank, non-comment line."""
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("%%"):
            return stripped[2:].split(maxsplit=1)[0] if stripped[2:].strip() else ""
        return None
    return None


def _mask_line(line: str) -> str | None:
    """The masked form of an IPython-only line (without its line break), or None."""
    body = line.rstrip("\r\n")
    stripped = body.lstrip()
    indent = body[: len(body) - len(stripped)]
    if not stripped:
        return None
    if stripped[0] in "%!" or stripped.startswith("?") or _HELP.match(body):
        # A blank line is a no-op anywhere at the top level; in a block, `pass` keeps the
        # block from being empty.
        return indent + "pass" if indent else ""
    assign = _ASSIGN_MAGIC.match(body)
    if assign and not stripped.startswith(("#", "'", '"')):
        target = assign.group(1)
        if "==" not in target and not target.rstrip().endswith(("<", ">", "!")):
            return target + "None"
    return None


# --------------------------------------------------------------------------- the notebook
@dataclass
class CodeCell:
    index: int  # 1-based, over all cells
    text: str  # the cell's source as written
    span: _SourceSpan
    items: list[str]  # decoded strings of the source list (or the one string)
    start: int = 0  # offset in the concatenated text
    row: int = 1  # first row in the concatenated text
    added_newline: bool = False
    masks: list[_Mask] = field(default_factory=list)


class Notebook:
    """A parsed .ipynb: the JSON text, its code cells and the text perflint analyzes."""

    def __init__(self, raw: str, cells: list[CodeCell], python: bool, skipped: Sequence[int] = ()) -> None:
        self.raw = raw
        self.cells = cells  # the analyzed code cells, in order
        self.python = python
        self.skipped = tuple(skipped)  # code cells left out (non-Python cell magics)
        self.text = self._concatenate()
        self._rows = [c.row for c in cells]
        self._raw_line_starts: list[int] | None = None

    # ----------------------------------------------------------------- reading
    @classmethod
    def from_bytes(cls, data: bytes) -> Notebook:
        try:
            raw = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotebookError(f"notebook is not UTF-8: {exc.reason} at byte {exc.start}") from None
        return cls.from_text(raw)

    @classmethod
    def from_text(cls, raw: str) -> Notebook:
        body = raw[1:] if raw.startswith("\ufeff") else raw
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            raise NotebookError(f"invalid notebook JSON: {exc.msg}", exc.lineno, exc.colno - 1) from None
        except RecursionError:
            raise NotebookError("invalid notebook JSON: nested too deep") from None
        if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
            if isinstance(data, dict) and "worksheets" in data:
                raise NotebookError("unsupported notebook format (nbformat 3); convert it with `jupyter nbconvert --to notebook`")
            raise NotebookError("not a Jupyter notebook: no `cells` list")
        try:
            spans = _scan_cells(raw)
        except (ValueError, IndexError, RecursionError) as exc:  # pragma: no cover - json.loads accepted it
            raise NotebookError(f"cannot read notebook JSON: {exc}") from None
        if len(spans) != len(data["cells"]):  # pragma: no cover - duplicate `cells` keys
            raise NotebookError("cannot read notebook JSON: ambiguous `cells`")
        cells: list[CodeCell] = []
        skipped: list[int] = []
        for number, (cell, span) in enumerate(zip(data["cells"], spans), start=1):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            source = cell.get("source", "")
            if isinstance(source, str):
                items = [source]
            elif isinstance(source, list) and all(isinstance(s, str) for s in source):
                items = source
            else:
                raise NotebookError(f"cell {number}: `source` must be a string or a list of strings")
            if span is None:
                continue  # no `source` key
            text = "".join(items)
            if not text.strip():
                continue
            magic = _cell_magic(split_lines(text))
            if magic is not None and magic not in PYTHON_CELL_MAGICS:
                skipped.append(number)
                continue
            cells.append(CodeCell(number, text, span, list(items)))
        return cls(raw, cells, _is_python(data), skipped)

    def _concatenate(self) -> str:
        parts: list[str] = []
        offset, row = 0, 1
        for cell in self.cells:
            text = cell.text
            cell.added_newline = not text.endswith("\n")
            if cell.added_newline:
                text += "\n"
            cell.start, cell.row, cell.masks = offset, row, []
            lines = split_lines(text)
            scanner = _LineScanner()
            out: list[str] = []
            position = offset
            magic_line = _cell_magic(lines) is not None
            continuing = False
            for line in lines:
                body = line.rstrip("\r\n")
                ending = line[len(body):]
                masked = None
                if continuing:
                    masked = ""  # the rest of a backslash-continued magic
                    continuing = body.endswith("\\")
                elif magic_line and body.lstrip().startswith("%%"):
                    masked, magic_line = "", False
                elif scanner.at_statement_start:
                    masked = _mask_line(line)
                    continuing = masked is not None and body.endswith("\\")
                if masked is None:
                    scanner.feed(line)
                    out.append(line)
                else:
                    cell.masks.append(_Mask(position, masked + ending, line))
                    out.append(masked + ending)
                position += len(out[-1])
            chunk = "".join(out)
            parts.append(chunk)
            offset += len(chunk)
            row += len(lines)
        return "".join(parts)

    # ----------------------------------------------------------------- mapping
    def cell_at(self, row: int) -> CodeCell | None:
        if not self.cells:
            return None
        return self.cells[max(0, bisect.bisect_right(self._rows, row) - 1)]

    def to_cell(self, location: Location, cell: CodeCell) -> Location:
        return Location(max(1, location.row - cell.row + 1), location.column)

    def map_diagnostic(self, diagnostic: Diagnostic) -> Diagnostic:
        cell = self.cell_at(diagnostic.location.row)
        if cell is None:
            return diagnostic
        fix = diagnostic.fix
        if fix is not None:
            fix = Fix(fix.applicability, fix.message, tuple(
                Edit(self._edit_location(e.location), self._edit_location(e.end_location), e.content)
                for e in fix.edits))
        extra = diagnostic.extra
        if extra.get(HOT_PATH_KEY):
            extra = {**extra, HOT_PATH_KEY: [self._cell_step(step) for step in extra[HOT_PATH_KEY]]}
        return replace(
            diagnostic,
            cell=cell.index,
            location=self.to_cell(diagnostic.location, cell),
            end_location=self.to_cell(diagnostic.end_location, cell),
            noqa_row=None if diagnostic.noqa_row is None else diagnostic.noqa_row - cell.row + 1,
            fix=fix,
            extra=extra,
        )

    def _cell_step(self, step: str) -> str:
        """"nb.ipynb:30 loop over batches" -> "nb.ipynb:cell 4:2 loop over batches"."""
        where, _, what = step.partition(" ")
        path, _, row = where.rpartition(":")
        cell = self.cell_at(int(row)) if row.isdigit() else None
        if cell is None:
            return step
        return f"{path}:cell {cell.index}:{int(row) - cell.row + 1} {what}"

    def _edit_location(self, location: Location) -> Location:
        cell = self.cell_at(location.row)
        return location if cell is None else self.to_cell(location, cell)

    def cell_lines(self, index: int) -> list[str] | None:
        for cell in self.cells:
            if cell.index == index:
                return [line.rstrip("\r\n") for line in split_lines(cell.text)]
        return None

    def file_position(self, index: int, row: int, column: int) -> tuple[int, int] | None:
        """(line, 1-based column) in the JSON text of a cell-relative position."""
        cell = next((c for c in self.cells if c.index == index), None)
        if cell is None:
            return None
        lines = split_lines(cell.text)
        if not lines:
            return None
        row = max(1, min(row, len(lines)))
        offset = sum(len(line) for line in lines[: row - 1]) + max(0, column - 1)
        for (start, end), item in zip(cell.span.items, cell.items):
            # The start of a line is the start of the next string, not the end of this one.
            if offset < len(item) or (start, end) == cell.span.items[-1]:
                raw_offset = start + _decoded_to_raw(self.raw[start:end], min(offset, len(item)))
                return self._raw_position(raw_offset)
            offset -= len(item)
        return None  # pragma: no cover - an empty cell has no findings

    def _raw_position(self, offset: int) -> tuple[int, int]:
        if self._raw_line_starts is None:
            self._raw_line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", self.raw)]
        index = bisect.bisect_right(self._raw_line_starts, offset) - 1
        return index + 1, offset - self._raw_line_starts[index] + 1

    # ----------------------------------------------------------------- writing
    def tracker(self) -> _Tracker:
        return _Tracker([c.start for c in self.cells], [m.offset for c in self.cells for m in c.masks])

    def render(self, text: str, tracker: _Tracker) -> tuple[str, dict[int, tuple[str, str]]]:
        """The JSON text with `text` (the edited concatenation) written back into the cells;
        also {cell index: (old source, new source)} for the cells that changed."""
        if tracker.conflict:
            raise NotebookError(tracker.conflict)
        bounds = tracker.cells + [len(text)]
        mask_offsets = iter(tracker.masks)
        changed: dict[int, tuple[str, str]] = {}
        for number, cell in enumerate(self.cells):
            chunk = text[bounds[number] : bounds[number + 1]]
            base = bounds[number]
            for mask in cell.masks:
                at = next(mask_offsets) - base
                if chunk[at : at + len(mask.masked)] != mask.masked:
                    raise NotebookError(f"cell {cell.index}: a fix touched an IPython line")
                chunk = chunk[:at] + mask.original + chunk[at + len(mask.masked):]
                base -= len(mask.original) - len(mask.masked)
            while chunk.endswith("\n\n") and not cell.text.endswith("\n\n"):
                chunk = chunk[:-1]  # an added import's blank line at the end of a cell
            if cell.added_newline and chunk.endswith("\n"):
                chunk = chunk[:-1]
            if chunk != cell.text:
                changed[cell.index] = (cell.text, chunk)
        out = self.raw
        for cell in sorted(self.cells, key=lambda c: c.span.start, reverse=True):
            if cell.index in changed:
                new_source = self._serialize(cell, changed[cell.index][1])
                out = out[: cell.span.start] + new_source + out[cell.span.end :]
        return out, changed

    def _serialize(self, cell: CodeCell, text: str) -> str:
        ascii_only = self.raw.isascii() and "\\u" in self.raw
        span = cell.span
        if not span.is_list:
            return json.dumps(text, ensure_ascii=ascii_only)
        raw_tokens = {item: self.raw[s:e] for item, (s, e) in zip(cell.items, span.items)}
        lines = split_lines(text)
        tokens = [raw_tokens.get(line) or json.dumps(line, ensure_ascii=ascii_only) for line in lines]
        if not tokens:
            return "[]"
        if span.items:
            first_start, last_end = span.items[0][0], span.items[-1][1]
            head = self.raw[span.start + 1 : first_start]
            tail = self.raw[last_end : span.end - 1]
            if len(span.items) > 1:
                sep = self.raw[span.items[0][1] : span.items[1][0]]
            else:
                sep = "," + head if "\n" in head else ", "
        else:  # pragma: no cover - empty cells are not analyzed
            head, tail, sep = "", "", ", "
        return "[" + head + sep.join(tokens) + tail + "]"

    # ----------------------------------------------------------------- diffs
    def cell_diff(self, display: str, changed: dict[int, tuple[str, str]]) -> str:
        chunks = []
        for index in sorted(changed):
            old, new = changed[index]
            name = f"{display}:cell {index}"
            chunks.append("".join(difflib.unified_diff(
                _lines_with_newline(old), _lines_with_newline(new), fromfile=name, tofile=name)))
        return "".join(c if c.endswith("\n") else c + "\n" for c in chunks if c)


def _lines_with_newline(text: str) -> list[str]:
    lines = split_lines(text)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    return lines


def _is_python(data: dict) -> bool:
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        return True
    for key, field_name in (("language_info", "name"), ("kernelspec", "language")):
        table = metadata.get(key)
        if isinstance(table, dict) and isinstance(table.get(field_name), str):
            return table[field_name].lower() in ("python", "python3", "ipython", "ipython3")
    return True


def _after_imports(text: str, offset: int) -> bool:
    """Does the cell before `offset` end with an import? Then imports a fix adds at the
    boundary join that cell's imports instead of opening the next cell."""
    before = text[:offset].rstrip()
    last = before[before.rfind("\n") + 1 :]
    return last.startswith(("import ", "from "))


class _Tracker:
    """Moves cell starts and masked lines through edits (offsets into the current text).

    An insertion exactly at a cell's first offset belongs to that cell, unless it is an
    import and the cell before ends with imports (libcst adds imports after the last one);
    an insertion at a masked line's offset goes before the masked line.
    """

    def __init__(self, cells: list[int], masks: list[int]) -> None:
        self.cells = list(cells)
        self.masks = list(masks)
        self.conflict: str | None = None

    def apply(self, edits: Sequence[tuple[int, int, str]], text: str | None = None) -> None:
        def import_joins_previous(anchor: int) -> Callable[[str], bool]:
            return lambda content: text is not None and self._is_import(content) and _after_imports(text, anchor)

        self.cells = [self._move(a, edits, import_joins_previous(a)) for a in self.cells]
        self.masks = [self._move(a, edits, lambda _content: True) for a in self.masks]

    def _move(self, anchor: int, edits: Sequence[tuple[int, int, str]], before: Callable[[str], bool]) -> int:
        """The anchor's new offset; `before(content)` says whether an insertion exactly at the
        anchor goes before it (moving it)."""
        delta = 0
        for start, end, content in edits:
            if start < anchor < end:
                self.conflict = "a fix spans two cells"
            elif end <= anchor and (start < anchor or before(content)):
                delta += len(content) - (end - start)
        return anchor + delta

    @staticmethod
    def _is_import(content: str) -> bool:
        lines = [line for line in content.splitlines() if line.strip()]
        return bool(lines) and all(line.startswith(("import ", "from ")) for line in lines)


# --------------------------------------------------------------------------- linting
def load(raw: bytes) -> Notebook | FileError:
    try:
        return Notebook.from_bytes(raw)
    except NotebookError as exc:
        return FileError(exc.message, exc.row, exc.column)


def _without_broken_cells(linter: Linter, display: str, notebook: Notebook) -> tuple[Notebook, list[Diagnostic]]:
    """Leave out cells that do not parse (each gets a cannot-analyze finding) so that the
    rest of the notebook is still checked."""
    errors: list[Diagnostic] = []
    for _ in range(len(notebook.cells)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(notebook.text)
            break
        except SyntaxError as exc:
            cell = notebook.cell_at(exc.lineno or 1)
            if cell is None:  # pragma: no cover - there is text, so there is a cell
                break
            row = max(1, (exc.lineno or cell.row) - cell.row + 1)
            error = FileError(f"syntax error in cell {cell.index}: {exc.msg}", row, max((exc.offset or 1) - 1, 0))
            errors += [replace(d, cell=cell.index) for d in linter._error_result(display, error).diagnostics]
            notebook = Notebook(notebook.raw, [c for c in notebook.cells if c is not cell], notebook.python,
                                notebook.skipped)
        except (ValueError, MemoryError, RecursionError, OverflowError):
            break  # the engine reports these for the whole notebook
    return notebook, errors


def lint_notebook(linter: Linter, display: str, raw: bytes, hot_functions: frozenset[str] = frozenset()) -> FileResult:
    """`hot_functions`: the notebook's seeds from the project pass (the summaries of the
    project's functions its cells call)."""
    notebook = load(raw)
    if isinstance(notebook, FileError):
        return linter._error_result(display, notebook)
    if not notebook.python or not notebook.cells:
        return FileResult(display, parsed=True)
    notebook, errors = _without_broken_cells(linter, display, notebook)
    result = linter.lint_source(SourceFile(path=display, text=notebook.text), hot_functions)
    result.diagnostics = sorted(errors + [notebook.map_diagnostic(d) for d in result.diagnostics],
                                key=Diagnostic.sort_key)
    return result


@dataclass
class NotebookFix:
    new_raw: bytes | None  # None when nothing changed (or the fixes could not be written back)
    outcome: FixOutcome
    diff: str
    error: str | None = None


def fix_notebook(linter: Linter, display: str, raw: bytes, unsafe: bool,
                 line_length: int | None = None) -> NotebookFix | FileResult:
    """Fix a notebook; a FileResult when it cannot be analyzed (nothing is written then).
    `line_length`: as for `fix_text`."""
    notebook = load(raw)
    if isinstance(notebook, FileError):
        return linter._error_result(display, notebook)
    if not notebook.python or not notebook.cells:
        return NotebookFix(None, FixOutcome(notebook.text), "")
    notebook, errors = _without_broken_cells(linter, display, notebook)
    source = SourceFile(path=display, text=notebook.text)
    tracker = notebook.tracker()

    def lint(src: SourceFile) -> list[Diagnostic]:
        return linter.lint_source(src).diagnostics

    outcome = fix_text(source, lint, unsafe, lambda new: SourceFile(path=display, text=new), line_length)
    for text, edits in outcome.rounds:  # map cell positions through every round of edits
        tracker.apply(edits, text)
    if outcome.text == notebook.text:
        outcome.remaining = sorted(errors + [notebook.map_diagnostic(d) for d in outcome.remaining],
                                   key=Diagnostic.sort_key)
        return NotebookFix(None, outcome, "")
    try:
        new_raw, changed = notebook.render(outcome.text, tracker)
    except NotebookError as exc:
        # Keep the file as it was and report what is in it.
        return NotebookFix(None, FixOutcome(notebook.text, [], lint_notebook(linter, display, raw).diagnostics),
                           "", f"{display}: fixes not written: {exc.message}")
    outcome.remaining = lint_notebook(linter, display, new_raw.encode("utf-8")).diagnostics
    outcome.fixed = [notebook.map_diagnostic(d) for d in outcome.fixed]
    outcome.dropped = [(notebook.map_diagnostic(d), why) for d, why in outcome.dropped]
    return NotebookFix(new_raw.encode("utf-8"), outcome, notebook.cell_diff(display, changed))


def apply_edits(notebook: Notebook, edits: list[tuple[int, int, str]]) -> tuple[str, dict[int, tuple[str, str]]]:
    """Apply one round of edits (offsets into `notebook.text`) and return the new JSON text."""
    tracker = notebook.tracker()
    tracker.apply(edits)
    return notebook.render(apply_text_edits(notebook.text, edits), tracker)

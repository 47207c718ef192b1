"""ruff's `full` format: each finding with a source snippet, the span underlined, and the
fix as a diff.

    PFL201 `.item()` copies a tensor value to the host and waits for the GPU every step
     --> train.py:7:17
      |
    5 |         loss = model(x)
    6 |         loss.backward()
    7 |         total += loss.item()
      |                  ^^^^^^^^^^^
      |
"""

from __future__ import annotations

import unicodedata
from typing import Sequence

from ..types import Applicability, Diagnostic, Edit
from .concise import line as concise_line
from .context import ReportContext, display_location

CONTEXT = 2  # lines shown around the finding
DIFF_CONTEXT = 1  # unchanged lines shown around a fix's change
TAB = "    "

_NOTES = {
    Applicability.UNSAFE: "note: This is an unsafe fix and may change runtime behavior",
    Applicability.DISPLAY_ONLY: "note: This is a display-only fix and is likely to be incorrect",
}


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1
               for c in text)


def _show(line: str) -> str:
    return line.replace("\t", TAB)


def _marker_line(line: str, start: int, end: int) -> str:
    """Spaces up to character `start` and carets to `end` (0-based, end exclusive)."""
    pad = _width(_show(line[:start]))
    length = max(1, _width(_show(line[start:end])))
    return " " * pad + "^" * length


def _snippet_rows(lines: list[str], d: Diagnostic) -> tuple[int, int]:
    first, last = d.location.row, max(d.end_location.row, d.location.row)
    top, bottom = max(1, first - CONTEXT), min(len(lines), last + CONTEXT)
    while top < first and not lines[top - 1].strip():
        top += 1
    while bottom > last and not lines[bottom - 1].strip():
        bottom -= 1
    return top, bottom


def _snippet(lines: list[str], d: Diagnostic, gutter: int) -> list[str]:
    first, last = d.location.row, max(d.end_location.row, d.location.row)
    top, bottom = _snippet_rows(lines, d)
    blank = " " * gutter + " |"
    out = [blank]
    for row in range(top, bottom + 1):
        text = lines[row - 1]
        out.append(f"{row:>{gutter}} | {_show(text)}".rstrip())
        if not first <= row <= last:
            continue
        start = d.location.column - 1 if row == first else len(text) - len(text.lstrip())
        end = d.end_location.column - 1 if row == last else len(text)
        if row != first and not text.strip():
            continue
        out.append(f"{blank} {_marker_line(text, start, max(end, start + 1))}")
    out.append(blank)
    return out


def _apply(lines: list[str], edits: Sequence[Edit]) -> list[str] | None:
    """The lines after applying `edits` (rows/columns are 1-based), or None if they do not fit."""
    text = "\n".join(lines) + "\n"
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def offset(row: int, column: int) -> int | None:
        if not 1 <= row <= len(starts):
            return None
        return min(starts[row - 1] + column - 1, len(text))

    spans = []
    for edit in edits:
        start, end = offset(edit.location.row, edit.location.column), offset(edit.end_location.row,
                                                                               edit.end_location.column)
        if start is None or end is None or end < start:
            return None
        spans.append((start, end, edit.content))
    out, position = [], 0
    for start, end, content in sorted(spans):
        if start < position:
            return None
        out.append(text[position:start])
        out.append(content)
        position = end
    out.append(text[position:])
    return "".join(out).split("\n")[:-1] if "".join(out).endswith("\n") else "".join(out).split("\n")


def _diff(before: list[str], after: list[str]) -> list[str]:
    import difflib

    groups = list(difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_grouped_opcodes(DIFF_CONTEXT))
    shown = [j2 for group in groups for _tag, _i1, _i2, _j1, j2 in group]
    gutter = len(str(max(shown, default=1)))
    out = [" " * gutter + " |"]
    for group in groups:
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for j in range(j1, j2):
                    out.append(f"{j + 1:>{gutter}} | {_show(after[j])}".rstrip())
                continue
            for i in range(i1, i2):
                out.append(f"{'':>{gutter}} - {_show(before[i])}".rstrip())
            for j in range(j1, j2):
                out.append(f"{j + 1:>{gutter}} + {_show(after[j])}".rstrip())
    out.append(" " * gutter + " |")
    return out


def render_one(d: Diagnostic, context: ReportContext) -> str:
    marker = " [*]" if d.fix is not None and d.fix.applicability is Applicability.SAFE else ""
    lines = context.sources.lines(d.path, d.cell)
    if lines is None:  # the source is gone (or was stdin): fall back to the concise line
        text = concise_line(d)
        if d.fix is not None:
            text += f"\nhelp: {d.fix.message}"
        return text + "\n"
    lines = list(lines)
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()  # the empty string after the final line break
    out = [f"{d.code}{marker} {d.message}"]
    gutter = len(str(_snippet_rows(lines, d)[1])) if lines else 1
    out.append(f"{' ' * gutter}--> {display_location(d)}")
    out.extend(_snippet(lines, d, gutter) if lines else [])
    hot_path = d.extra.get("hot_path")
    if hot_path:  # why this line runs every step, from the entry point down
        out.append("note: runs every step: " + "\n  -> ".join(hot_path))
    if d.fix is not None:
        out.append(f"help: {d.fix.message}")
        after = _apply(lines, d.fix.edits)
        if after is not None and after != lines:
            diff = _diff(lines, after)
            if d.cell is not None:
                out.append(f"{diff[0][:-2]}::: cell {d.cell}")
            out.extend(diff)
        note = _NOTES.get(d.fix.applicability)
        if note:
            out.append(note)
    return "\n".join(out) + "\n"


def render(diagnostics: Sequence[Diagnostic], context: ReportContext | None = None) -> str:
    context = context or ReportContext()
    return "\n".join(render_one(d, context) for d in diagnostics) + ("\n" if diagnostics else "")

"""Where a `# noqa` comment goes, and editing noqa comments (`--add-noqa`, unused codes).

A comment can only end a line that is not inside a string and does not continue onto the
next one. So, as ruff does, a finding on a line of a multi-line string is suppressed by a
comment after the closing quotes, and one on a backslash-continued line by a comment on
the last line of the continuation: `noqa_rows` maps every row to that row.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from dataclasses import dataclass, field
from typing import Iterable

from .noqa import _LINE, NoqaComment, Suppressions, parse_suppressions

_SPLIT = re.compile(r"[\s,]+")
# Only files with one of these can have rows that a comment cannot end.
_JOINS = re.compile(r'"""|\'\'\'|\\\r?\n|\\\r')
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)
_NEWLINES = (tokenize.NEWLINE, tokenize.NL, tokenize.ENCODING, tokenize.INDENT, tokenize.DEDENT)


# --------------------------------------------------------------------------- noqa rows
def _joined_ranges(text: str) -> list[tuple[int, int]]:
    """(first_row, last_row) of every multi-line string and backslash continuation."""
    ranges: list[tuple[int, int]] = []
    fstring_starts: list[int] = []
    previous: tokenize.TokenInfo | None = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                ranges.append((tok.start[0], tok.end[0]))
            elif _FSTRING_START is not None and tok.type == _FSTRING_START:
                fstring_starts.append(tok.start[0])
            elif _FSTRING_END is not None and tok.type == _FSTRING_END and fstring_starts:
                start = fstring_starts.pop()
                if tok.end[0] > start:
                    ranges.append((start, tok.end[0]))
            if (
                previous is not None
                and tok.start[0] > previous.end[0]
                and previous.type not in _NEWLINES
                and tok.type != tokenize.ENDMARKER
            ):
                ranges.append((previous.end[0], tok.start[0]))  # joined by a backslash
            previous = tok
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # keep what was found; the file is reported as not parseable anyway
    return ranges


def noqa_rows(text: str) -> dict[int, int]:
    """Rows whose `# noqa` belongs on a later row, mapped to that row (others map to
    themselves and are left out)."""
    if not _JOINS.search(text) and not (sys.version_info >= (3, 12) and "{" in text):
        return {}
    merged: list[list[int]] = []
    for start, end in sorted(_joined_ranges(text)):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    mapping: dict[int, int] = {}
    for start, end in merged:
        for row in range(start, end):
            mapping[row] = end
    return mapping


class NoqaRowMap:
    """`noqa_rows` computed only when needed: tokenizing a file costs more than analyzing
    it, so a cheap test on each finding's row comes first (a backslash at the end of the
    line, or an odd number of triple quotes before the end of the line: the row may be
    inside a multi-line string). A row that passes is mapped to itself."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._possible = bool(_JOINS.search(text)) or (sys.version_info >= (3, 12) and "{" in text)
        self._exact: dict[int, int] | None = None
        self._line_starts: list[int] | None = None
        self._triples: list[list[int]] | None = None

    def __call__(self, row: int) -> int:
        if not self._possible:
            return row
        if self._exact is None and not self._maybe_joined(row):
            return row
        if self._exact is None:
            self._exact = noqa_rows(self.text)
        return self._exact.get(row, row)

    def _maybe_joined(self, row: int) -> bool:
        import bisect

        if self._line_starts is None:
            self._line_starts = _line_starts(self.text)
            self._triples = [[m.start() for m in re.finditer(q, self.text)] for q in ('"""', "'''")]
        starts = self._line_starts
        if not 1 <= row <= len(starts):
            return False
        line_start, line_end = _line_bounds(self.text, starts, row)
        line = self.text[line_start:line_end]
        if line.rstrip().endswith("\\"):
            return True
        if sys.version_info >= (3, 12) and line.count("{") != line.count("}"):
            return True
        assert self._triples is not None
        return any(bisect.bisect_left(positions, line_end) % 2 for positions in self._triples)


# --------------------------------------------------------------------------- comments
def ordered_codes(comment: NoqaComment) -> list[str]:
    """The codes of a `# noqa: A, B` comment in the order written (upper case)."""
    match = _LINE.search(comment.text)
    raw = match.group("codes") if match else None
    if not raw:
        return []
    out: list[str] = []
    for code in _SPLIT.split(raw.strip()):
        if code and code.upper() not in out:
            out.append(code.upper())
    return out


def _line_bounds(text: str, line_starts: list[int], row: int) -> tuple[int, int]:
    """Offsets of the start of `row` and of the end of its content (before the line break)."""
    start = line_starts[row - 1]
    end = line_starts[row] if row < len(line_starts) else len(text)
    while end > start and text[end - 1] in "\r\n":
        end -= 1
    return start, end


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(m.end() for m in re.finditer(r"\r\n|\r|\n", text))
    return starts


def _comment_starts(text: str) -> dict[int, int]:
    """row -> column of the first comment on that row."""
    found: dict[int, int] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                found.setdefault(tok.start[0], tok.start[1])
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return found


def remove_codes_edit(text: str, comment: NoqaComment, remove: Iterable[str]) -> tuple[int, int, str]:
    """The edit that drops `remove` from a `# noqa: ...` comment, or the whole directive when
    no code is left (the whole line when the comment was alone on it)."""
    drop = {c.upper() for c in remove}
    keep = [c for c in ordered_codes(comment) if c not in drop]
    starts = _line_starts(text)
    line_start, line_end = _line_bounds(text, starts, comment.row)
    start, end = line_start + comment.column, line_start + comment.end_column
    if keep:
        return (start, end, "# noqa: " + ", ".join(keep))
    line = text[line_start:line_end]
    before, after = line[: comment.column], line[comment.end_column :]
    comment_column = _comment_starts(text).get(comment.row, comment.column)
    if comment_column < comment.column:
        # The directive follows another comment: drop it and the blank before it.
        return (line_start + len(before.rstrip()), end, "")
    if after.strip():
        return (start, end, "#")  # text after the codes stays, as a comment
    if not before.strip():
        # The comment is alone on its line: remove the line.
        next_start = starts[comment.row] if comment.row < len(starts) else len(text)
        return (line_start, next_start, "")
    return (line_start + len(before.rstrip()), line_end, "")


# --------------------------------------------------------------------------- --add-noqa
@dataclass
class AddNoqaPlan:
    edits: list[tuple[int, int, str]] = field(default_factory=list)  # offsets into the text
    added: int = 0  # codes written
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (row, why)


def plan_add_noqa(text: str, codes_by_row: dict[int, set[str]],
                  suppressions: Suppressions | None = None) -> AddNoqaPlan:
    """Edits that add `# noqa: CODES` on each row (rows are noqa rows), merging with an
    existing `# noqa: ...` comment on the row."""
    plan = AddNoqaPlan()
    if not codes_by_row:
        return plan
    suppressions = suppressions if suppressions is not None else parse_suppressions(text)
    starts = _line_starts(text)
    joined = noqa_rows(text)
    for row in sorted(codes_by_row):
        codes = sorted(c.upper() for c in codes_by_row[row])
        if row < 1 or row > len(starts):
            plan.skipped.append((row, "no such line"))
            continue
        if row in joined:
            plan.skipped.append((row, "a comment there would be inside a string or continuation"))
            continue
        line_start, line_end = _line_bounds(text, starts, row)
        line = text[line_start:line_end]
        existing = suppressions.lines.get(row)
        if existing is not None:
            if existing.codes is None:
                continue  # a bare noqa already suppresses everything on the line
            current = ordered_codes(existing)
            new = [c for c in codes if c not in current]
            if not new:
                continue
            plan.edits.append((line_start + existing.column, line_start + existing.end_column,
                               "# noqa: " + ", ".join(current + new)))
            plan.added += len(new)
            continue
        if line.rstrip().endswith("\\"):
            plan.skipped.append((row, "the line continues with a backslash"))
            continue
        content_end = line_start + len(line.rstrip())
        plan.edits.append((content_end, line_end, "  # noqa: " + ", ".join(codes)))
        plan.added += len(codes)
    return plan

"""`# noqa` suppressions: per line (`# noqa`, `# noqa: PFL201, PFL202`) and per file
(`# perflint: noqa`, `# perflint: noqa: PFL201`)."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

ALL = "*"
_CODE = r"[A-Za-z]+[0-9]+"
_LINE = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODE}(?:[\s,]+{_CODE})*))?", re.IGNORECASE)
_FILE = re.compile(rf"#\s*perflint\s*:\s*noqa(?::\s*(?P<codes>{_CODE}(?:[\s,]+{_CODE})*))?", re.IGNORECASE)
_SPLIT = re.compile(r"[\s,]+")
_QUICK = re.compile(r"noqa", re.IGNORECASE)


@dataclass
class NoqaComment:
    row: int
    column: int  # 0-based character column of the `#`
    end_column: int
    codes: frozenset[str] | None  # None: a bare `# noqa`
    text: str
    used: set[str] = field(default_factory=set)


@dataclass
class Suppressions:
    file_codes: frozenset[str] | None = None  # ALL when the whole file is exempt
    lines: dict[int, NoqaComment] = field(default_factory=dict)

    def file_exempt(self, code: str) -> bool:
        codes = self.file_codes
        return codes is not None and (ALL in codes or code.upper() in codes)

    def suppresses(self, code: str, row: int) -> bool:
        if self.file_exempt(code):
            return True
        comment = self.lines.get(row)
        if comment is None:
            return False
        if comment.codes is None or code.upper() in comment.codes:
            comment.used.add(code.upper())
            return True
        return False


def _codes(match: re.Match[str]) -> frozenset[str] | None:
    raw = match.group("codes")
    if not raw:
        return None
    return frozenset(c.upper() for c in _SPLIT.split(raw.strip()) if c)


def _comments(text: str) -> list[tuple[int, int, str]]:
    """(row, column, comment text) for every comment; tokenize knows strings from comments."""
    found: list[tuple[int, int, str]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                found.append((tok.start[0], tok.start[1], tok.string))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # Fall back to a line scan; only used for files tokenize rejects.
        for row, line in enumerate(text.splitlines(), start=1):
            index = line.find("#")
            if index >= 0:
                found.append((row, index, line[index:]))
    return found


def parse_suppressions(text: str) -> Suppressions:
    result = Suppressions()
    if not _QUICK.search(text):
        return result
    for row, column, comment in _comments(text):
        file_match = _FILE.search(comment)
        if file_match:
            codes = _codes(file_match)
            new = frozenset({ALL}) if codes is None else codes
            result.file_codes = new if result.file_codes is None else result.file_codes | new
            continue
        line_match = _LINE.search(comment)
        if line_match:
            result.lines[row] = NoqaComment(
                row=row,
                column=column + line_match.start(),
                end_column=column + line_match.end(),
                codes=_codes(line_match),
                text=line_match.group(0),
            )
    return result

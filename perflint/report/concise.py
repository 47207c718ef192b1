"""`path:row:col: CODE [*] message`, one line per finding (ruff's concise format)."""

from __future__ import annotations

from typing import Sequence

from ..types import Applicability, Diagnostic


def location(d: Diagnostic) -> str:
    if d.cell is not None:
        return f"{d.path}:cell {d.cell}:{d.location.row}:{d.location.column}"
    return f"{d.path}:{d.location.row}:{d.location.column}"


def line(d: Diagnostic) -> str:
    marker = " [*]" if d.fix is not None and d.fix.applicability is Applicability.SAFE else ""
    return f"{location(d)}: {d.code}{marker} {d.message}"


def render(diagnostics: Sequence[Diagnostic]) -> str:
    return "".join(line(d) + "\n" for d in diagnostics)

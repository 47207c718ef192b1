"""Output formats: each is a pure function from diagnostics to text."""

from __future__ import annotations

from typing import Callable, Sequence

from ..types import Diagnostic
from . import concise, json_format

Formatter = Callable[[Sequence[Diagnostic]], str]

FORMATTERS: dict[str, Formatter] = {
    "concise": concise.render,
    "json": json_format.render,
    "json-lines": json_format.render_lines,
}


def render(name: str, diagnostics: Sequence[Diagnostic]) -> str:
    return FORMATTERS[name](diagnostics)

"""Output formats: each is a pure function from diagnostics (and a `ReportContext` with the
sources and project root) to text."""

from __future__ import annotations

from typing import Callable, Sequence

from ..types import Diagnostic
from . import concise, full, github, gitlab, json_format, junit, sarif
from .context import ReportContext

Formatter = Callable[[Sequence[Diagnostic], ReportContext], str]


def _plain(render: Callable[[Sequence[Diagnostic]], str]) -> Formatter:
    def format_plain(diagnostics: Sequence[Diagnostic], context: ReportContext | None = None) -> str:
        return render(diagnostics)
    return format_plain


FORMATTERS: dict[str, Formatter] = {
    "concise": _plain(concise.render),
    "full": full.render,
    "json": _plain(json_format.render),
    "json-lines": _plain(json_format.render_lines),
    "github": github.render,
    "sarif": sarif.render,
    "junit": junit.render,
    "gitlab": gitlab.render,
}


def render(name: str, diagnostics: Sequence[Diagnostic], context: ReportContext | None = None) -> str:
    return FORMATTERS[name](diagnostics, context or ReportContext())

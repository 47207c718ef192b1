"""Printing trace diagnostics with `perflint.report`'s formatters.

The trace data of a diagnostic (`extra["trace"]`: the count, once or per step, the op) is
already part of the json and json-lines output (extras are top-level keys there); for
SARIF it is added to each result's `properties`, which SARIF reserves for tool data.
"""

from __future__ import annotations

import json
from typing import Sequence

from ..report import FORMATTERS
from ..types import Diagnostic

HUMAN_FORMATS = ("concise", "full", "github")


def available_formats() -> tuple[str, ...]:
    from ..config import OUTPUT_FORMATS

    return tuple(name for name in OUTPUT_FORMATS if name in FORMATTERS)


def render(output_format: str, diagnostics: Sequence[Diagnostic]) -> str:
    """`perflint.report`'s formatter for `output_format`, with the trace data in SARIF."""
    from .. import report

    try:
        from ..report.context import cwd_context  # formatters that read sources and the root
    except ImportError:
        text = report.render(output_format, diagnostics)
    else:
        text = report.render(output_format, diagnostics, cwd_context())  # type: ignore[call-arg]
    return with_trace_properties(output_format, text, diagnostics)


def with_trace_properties(output_format: str, text: str, diagnostics: Sequence[Diagnostic]) -> str:
    """Add each diagnostic's `extra["trace"]` to its SARIF result's `properties`."""
    if output_format != "sarif" or not any("trace" in d.extra for d in diagnostics):
        return text
    document = json.loads(text)
    results = document["runs"][0]["results"]
    if len(results) != len(diagnostics):  # not one result per diagnostic: leave it alone
        return text
    for result, diagnostic in zip(results, diagnostics):
        trace = diagnostic.extra.get("trace")
        if trace is not None:
            result.setdefault("properties", {})["trace"] = trace
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"

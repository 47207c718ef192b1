"""GitHub Actions workflow commands: one `::warning` annotation per finding.

    ::warning title=perflint (PFL201),file=/abs/train.py,line=7,col=17,endLine=7,endColumn=28::train.py:7:17: PFL201 ...

`file` is absolute (as ruff writes it), so annotations land right whatever directory the
step ran in.

GitHub shows at most 10 warning annotations per step, so the CLI also prints the summary
(and SARIF upload is the way to see every finding in the code-scanning UI). Notebook
findings point at the line of the .ipynb JSON that holds the source line.
"""

from __future__ import annotations

from typing import Sequence

from ..types import Diagnostic
from .context import ReportContext, display_location

LEVEL = "warning"
ANNOTATION_LIMIT = 10  # per step and per level, as GitHub documents


def escape_data(value: str) -> str:
    """The message part (actions/toolkit `escapeData`)."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """A property value (actions/toolkit `escapeProperty`): also `:` and `,`."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def annotation(d: Diagnostic, context: ReportContext) -> str:
    start, end = context.stored_region(d)
    properties = {
        "title": f"perflint ({d.code})",
        "file": context.absolute_path(d.path).as_posix(),
        "line": str(start.row),
        "col": str(start.column),
        "endLine": str(end.row),
        "endColumn": str(end.column),
    }
    message = f"{display_location(d)}: {d.code} {d.message}"
    if d.fix is not None:
        message += f"\n  help: {d.fix.message}"
    props = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    return f"::{LEVEL} {props}::{escape_data(message)}"


def render(diagnostics: Sequence[Diagnostic], context: ReportContext | None = None) -> str:
    context = context or ReportContext()
    return "".join(annotation(d, context) + "\n" for d in diagnostics)

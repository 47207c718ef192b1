"""GitLab code quality report (the Code Climate subset GitLab reads):
`[{description, check_name, fingerprint, severity, location: {path, positions}}]`.

Paths are relative to the project root; notebook findings point at the line of the .ipynb
JSON that holds the source line, so the merge-request widget links to the right place.
"""

from __future__ import annotations

import hashlib
import json
from typing import Sequence

from ..types import Diagnostic
from .context import ReportContext

SEVERITY = "minor"  # GitLab: info, minor, major, critical, blocker
SEVERITY_BY_CODE = {"PFL001": "major"}  # a file nobody checks


def issue(d: Diagnostic, fingerprint: str, context: ReportContext) -> dict:
    start, end = context.stored_region(d)
    description = f"{d.code}: {d.message}"
    if d.cell is not None:
        description += f" (cell {d.cell}, line {d.location.row})"
    return {
        "categories": ["Performance"],
        "check_name": d.code,
        "description": description,
        "fingerprint": fingerprint,
        "location": {
            "path": context.relative_path(d.path),
            "positions": {
                "begin": {"column": start.column, "line": start.row},
                "end": {"column": end.column, "line": end.row},
            },
        },
        "severity": SEVERITY_BY_CODE.get(d.code, SEVERITY),
        "type": "issue",
    }


def render(diagnostics: Sequence[Diagnostic], context: ReportContext | None = None) -> str:
    context = context or ReportContext()
    # GitLab wants one fingerprint per issue: hash the path, code, line text and occurrence.
    prints = [hashlib.sha256(f.encode()).hexdigest()[:16] for f in context.fingerprints(diagnostics, with_path=True)]
    issues = [issue(d, p, context) for d, p in zip(diagnostics, prints)]
    return json.dumps(issues, indent=2, ensure_ascii=False) + "\n"

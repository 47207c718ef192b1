"""SARIF 2.1.0 for GitHub code scanning (`github/codeql-action/upload-sarif`).

What GitHub reads, and what this writes: relative URIs against `%SRCROOT%` (the repository
root, or the working directory outside a repository; also given as an absolute
`originalUriBaseIds` entry), 1-based UTF-16 columns
(`columnKind`), `level: warning`, a stable `partialFingerprints.primaryLocationLineHash`
(a hash of the rule and the line's text plus an occurrence number, so alerts survive lines
moving), and every reported rule in `tool.driver.rules` with its documentation. Safe and
unsafe fixes become SARIF `fixes`.

Notebook findings point at the line of the .ipynb JSON that holds the source line (that is
what GitHub shows for the file); the cell and cell-relative position go in `properties`.
Notebook fixes are left out: they edit cell source, not the JSON text.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any, Sequence

from ..registry import rule_for
from ..types import Applicability, Diagnostic, Edit
from .context import INFORMATION_URI, ReportContext

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = "warning"
MAX_DESCRIPTION = 1024  # GitHub truncates longer descriptions


def _clip(text: str, limit: int = MAX_DESCRIPTION) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _plain(markdown: str) -> str:
    """Markdown docs as plain text: headings without `#`, code fences dropped."""
    lines = []
    for line in markdown.splitlines():
        if line.startswith("```"):
            continue
        lines.append(line[3:] if line.startswith("## ") else line)
    return "\n".join(lines).strip()


def rule_descriptor(code: str, fallback: Diagnostic) -> dict[str, Any]:
    rule = rule_for(code)
    if rule is None:  # a diagnostic from a rule we do not know (from_json input)
        return {"id": code, "name": fallback.name, "shortDescription": {"text": fallback.name},
                "fullDescription": {"text": fallback.name}, "help": {"text": fallback.url or fallback.name},
                "defaultConfiguration": {"level": LEVEL}}
    docs = rule.docs()
    sections = rule.doc_sections()
    summary = rule.summary() or rule.name
    full = "\n\n".join(s for s in (sections.get("What it does"), sections.get("Why is this bad?")) if s)
    header = f"{rule.name} ({rule.code})"
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": _clip(summary)},
        "fullDescription": {"text": _clip(_plain(full) or summary)},
        "help": {"text": f"{header}\n\n{_plain(docs)}", "markdown": f"# {header}\n\n{docs}"},
        "helpUri": rule.url(),
        "defaultConfiguration": {"level": LEVEL},
        "properties": {
            "tags": ["performance", "pytorch", rule.family],
            "precision": "high",
            "problem.severity": "warning",
        },
    }


def _region(start_row: int, start_col: int, end_row: int, end_col: int) -> dict[str, int]:
    return {"startLine": start_row, "startColumn": start_col, "endLine": end_row, "endColumn": end_col}


def _artifact(d: Diagnostic, context: ReportContext) -> dict[str, str]:
    uri, base = context.uri(d.path)
    return {"uri": uri, "uriBaseId": base} if base else {"uri": uri}


def _fix(d: Diagnostic, context: ReportContext) -> list[dict[str, Any]]:
    fix = d.fix
    if fix is None or fix.applicability is Applicability.DISPLAY_ONLY or d.cell is not None or not fix.edits:
        return []

    def replacement(edit: Edit) -> dict[str, Any]:
        start, end = context.utf16(d, edit.location), context.utf16(d, edit.end_location)
        item: dict[str, Any] = {"deletedRegion": _region(start.row, start.column, end.row, end.column)}
        item["insertedContent"] = {"text": edit.content}
        return item

    description = fix.message + (" (unsafe: may change behaviour)" if fix.applicability is Applicability.UNSAFE else "")
    return [{
        "description": {"text": description},
        "artifactChanges": [{"artifactLocation": _artifact(d, context),
                             "replacements": [replacement(e) for e in fix.edits]}],
        "properties": {"applicability": fix.applicability.value},
    }]


def result(d: Diagnostic, rule_index: int, fingerprint: str, context: ReportContext) -> dict[str, Any]:
    start, end = context.stored_region(d, utf16=True)
    item: dict[str, Any] = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": LEVEL,
        "message": {"text": d.message},
        "locations": [{"physicalLocation": {
            "artifactLocation": _artifact(d, context),
            "region": _region(start.row, start.column, end.row, end.column),
        }}],
        "partialFingerprints": {"primaryLocationLineHash": fingerprint},
    }
    fixes = _fix(d, context)
    if fixes:
        item["fixes"] = fixes
    if d.cell is not None:
        item["properties"] = {"cell": d.cell, "cellLocation": d.location.to_json(),
                              "cellEndLocation": d.end_location.to_json()}
    return item


def document(diagnostics: Sequence[Diagnostic], context: ReportContext | None = None) -> dict[str, Any]:
    context = context or ReportContext()
    codes = sorted({d.code for d in diagnostics})
    first = {code: next(d for d in diagnostics if d.code == code) for code in codes}
    rules = [rule_descriptor(code, first[code]) for code in codes]
    index = {code: i for i, code in enumerate(codes)}
    prints = context.fingerprints(diagnostics, with_path=False)
    run: dict[str, Any] = {
        "tool": {"driver": {
            "name": "perflint",
            "version": context.version,
            "semanticVersion": context.version,
            "informationUri": INFORMATION_URI,
            "rules": rules,
        }},
        "columnKind": "utf16CodeUnits",
        "results": [result(d, index[d.code], fp, context) for d, fp in zip(diagnostics, prints)],
    }
    if context.root is not None and PurePath(context.root).is_absolute():
        root_uri = PurePath(context.root).as_uri()
        run["originalUriBaseIds"] = {"%SRCROOT%": {"uri": root_uri.rstrip("/") + "/"}}
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def render(diagnostics: Sequence[Diagnostic], context: ReportContext | None = None) -> str:
    return json.dumps(document(diagnostics, context), indent=2, ensure_ascii=False) + "\n"

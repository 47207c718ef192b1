"""`--statistics`: how many findings of each rule (ruff's layout).

    3	PFL201	[ ] tensor-item
    1	PFL002	[*] unused-noqa
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Sequence

from ..types import Applicability, Diagnostic


def _rows(diagnostics: Sequence[Diagnostic]) -> list[dict]:
    counts: Counter[str] = Counter(d.code for d in diagnostics)
    fixable: Counter[str] = Counter(
        d.code for d in diagnostics if d.fix is not None and d.fix.applicability is Applicability.SAFE)
    names = {d.code: d.name for d in diagnostics}
    order = sorted(counts, key=lambda code: (-counts[code], code))
    return [{"code": code, "name": names[code], "count": counts[code], "fixable": fixable[code] > 0,
             "fixable_count": fixable[code]} for code in order]


def render(diagnostics: Sequence[Diagnostic]) -> str:
    rows = _rows(diagnostics)
    if not rows:
        return ""
    count_width = max(len(str(r["count"])) for r in rows)
    code_width = max(len(r["code"]) for r in rows)
    any_fixable = any(r["fixable"] for r in rows)
    out = []
    for r in rows:
        marker = ("[*] " if r["fixable"] else "[ ] ") if any_fixable else ""
        out.append(f"{r['count']:>{count_width}}\t{r['code']:<{code_width}}\t{marker}{r['name']}")
    return "\n".join(out) + "\n"


def render_json(diagnostics: Sequence[Diagnostic]) -> str:
    return json.dumps(_rows(diagnostics), indent=2) + "\n"

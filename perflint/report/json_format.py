"""ruff-compatible JSON: a pretty-printed array, or one object per line (json-lines)."""

from __future__ import annotations

import json
from typing import Sequence

from ..types import Diagnostic


def render(diagnostics: Sequence[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in diagnostics], indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render_lines(diagnostics: Sequence[Diagnostic]) -> str:
    return "".join(json.dumps(d.to_json(), sort_keys=True, ensure_ascii=False) + "\n" for d in diagnostics)

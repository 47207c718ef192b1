"""What rules hand to the engine: findings, fix plans, and why a file could not be analyzed.

Plain data below both the facts (whose `RuleContext.report` builds findings) and the rule
layer (`perflint.rule` re-exports these names, so `from perflint.rule import RawFinding`
keeps working).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .types import Applicability


@dataclass(frozen=True)
class FileError:
    """Why a file could not be analyzed (syntax error, undecodable, unreadable, ...)."""

    message: str
    row: int = 1
    column: int = 0
    subject: str = "file"  # "directory" for one that cannot be listed


@dataclass
class RawFinding:
    """A finding before positions are resolved: what a rule hands to the engine."""

    code: str
    message: str
    node: ast.AST | None = None
    span: tuple[int, int] | None = None  # character offsets, when not a node
    fix: FixPlan | None = None
    row: int | None = None
    column: int | None = None
    # Why the reported code runs every step: (row, what) steps, the entry first; and the
    # function other files seed, when the chain starts there (see perflint.hot_paths).
    hot_path: tuple[tuple[int, str], ...] = ()
    hot_seed: str | None = None


@dataclass
class FixPlan:
    """A fix as the rule builds it: character-offset edits into the source text."""

    applicability: Applicability
    message: str
    edits: list[tuple[int, int, str]]
    imports: list[str] = field(default_factory=list)  # modules the replacement needs, e.g. "torch"

"""Fixes: turning rules' edit plans into edits, and applying them safely.

Applying: pick the applicable fixes, drop overlapping ones, apply, check that the result
still compiles (a fix that breaks the file is dropped and the others kept), re-lint, and
repeat until nothing changes. Imports a fix needs are scheduled with libcst's
`AddImportsVisitor`, so they land where a human would put them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from .rule import FixPlan
from .types import Applicability, Diagnostic, Edit, Fix, Location

if TYPE_CHECKING:
    from .source import SourceFile

MAX_ITERATIONS = 10


def materialize_fix(source: SourceFile, plan: FixPlan) -> Fix:
    edits = [_edit(source, start, end, text) for start, end, text in plan.edits]
    applicability = plan.applicability
    if plan.imports:
        import_edit = _import_edit(source.text, plan.imports)
        if import_edit is None:
            applicability = Applicability.DISPLAY_ONLY
        elif import_edit is not False:
            start, end, text = import_edit
            edits.append(_edit(source, start, end, text))
    edits.sort(key=lambda e: (e.location.row, e.location.column))
    return Fix(applicability, plan.message, tuple(edits))


def _edit(source: SourceFile, start: int, end: int, text: str) -> Edit:
    row, col = source.position_of(start)
    end_row, end_col = source.position_of(end)
    return Edit(Location(row, col + 1), Location(end_row, end_col + 1), text)


def _import_edit(text: str, modules: list[str]) -> tuple[int, int, str] | None | bool:
    """An insertion that adds `import <module>` lines; False if none is needed, None if libcst
    cannot place it."""
    try:
        import libcst as cst
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import AddImportsVisitor
    except ImportError:  # pragma: no cover - libcst is a dependency
        return None
    try:
        module = cst.parse_module(text)
    except Exception:
        return None
    context = CodemodContext()
    for name in modules:
        AddImportsVisitor.add_needed_import(context, name)
    new_text = AddImportsVisitor(context).transform_module(module).code
    if new_text == text:
        return False
    prefix = 0
    limit = min(len(text), len(new_text))
    while prefix < limit and text[prefix] == new_text[prefix]:
        prefix += 1
    # Insert at a line start so the edit reads as whole lines.
    prefix = text.rfind("\n", 0, prefix) + 1 if prefix else 0
    inserted_len = len(new_text) - len(text)
    inserted = new_text[prefix : prefix + inserted_len]
    if new_text[:prefix] + inserted + text[prefix:] != new_text:
        return None
    return (prefix, prefix, inserted)


# --------------------------------------------------------------------------- applying
def edit_offsets(source: SourceFile, edit: Edit) -> tuple[int, int]:
    start = source.offset(edit.location.row, edit.location.column - 1)
    end = source.offset(edit.end_location.row, edit.end_location.column - 1)
    return start, end


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    out: list[str] = []
    position = 0
    for start, end, content in sorted(edits, key=lambda e: (e[0], e[1])):
        out.append(text[position:start])
        out.append(content)
        position = end
    out.append(text[position:])
    return "".join(out)


def compiles(text: str, path: str) -> bool:
    """Does `text` compile to bytecode? A full compile, not just a parse: it also catches
    what only the compiler checks (`await` outside an async function, `return` at module
    level, a misplaced `nonlocal`)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False


def applicable(diagnostic: Diagnostic, unsafe: bool) -> bool:
    fix = diagnostic.fix
    if fix is None:
        return False
    if fix.applicability is Applicability.SAFE:
        return True
    return unsafe and fix.applicability is Applicability.UNSAFE


@dataclass
class FixOutcome:
    text: str
    fixed: list[Diagnostic] = field(default_factory=list)
    remaining: list[Diagnostic] = field(default_factory=list)
    dropped: list[tuple[Diagnostic, str]] = field(default_factory=list)  # fixes that broke the file
    # Each round: the text it started from and the character-offset edits applied to it
    # (what a caller needs to check that nothing outside the fixes changed).
    rounds: list[tuple[str, list[tuple[int, int, str]]]] = field(default_factory=list)

    def changed(self, original: str) -> bool:
        return self.text != original


def fix_text(
    source: SourceFile,
    lint: Callable[[SourceFile], list[Diagnostic]],
    unsafe: bool,
    make_source: Callable[[str], SourceFile],
) -> FixOutcome:
    """Apply fixes until nothing applicable is left (at most MAX_ITERATIONS rounds).

    `FixOutcome.rounds` records each round's text and edits (offsets into that text), for
    callers that map positions through the rounds (notebook cells, the corpus check)."""
    original = source.text
    originally_compiles: bool | None = None  # computed once, and only if there is a fix to check
    current = source
    fixed: list[Diagnostic] = []
    rounds: list[tuple[str, list[tuple[int, int, str]]]] = []
    dropped: list[tuple[Diagnostic, str]] = []
    broken: set[tuple[str, str]] = set()  # (code, fix message) pairs known to break the file
    diagnostics = lint(current)
    for _ in range(MAX_ITERATIONS):
        candidates = [
            d for d in diagnostics
            if applicable(d, unsafe) and (d.code, _fix_key(current, d)) not in broken
        ]
        chosen = _non_overlapping(current, candidates)
        if not chosen:
            break
        edits = _dedupe_inserts([e for d in chosen for e in _offsets(current, d)])
        text = apply_edits(current.text, edits)
        if originally_compiles is None:
            originally_compiles = compiles(original, source.path)
        if originally_compiles and not compiles(text, source.path):
            text, kept, bad = _apply_individually(current, chosen, source.path)
            for diagnostic in bad:
                broken.add((diagnostic.code, _fix_key(current, diagnostic)))
                dropped.append((diagnostic, "the fixed code did not compile"))
            chosen = kept
            if not chosen:
                continue
            edits = _dedupe_inserts([e for d in chosen for e in _offsets(current, d)])
        fixed.extend(chosen)
        rounds.append((current.text, edits))
        current = make_source(text)
        diagnostics = lint(current)
    return FixOutcome(current.text, fixed, diagnostics, dropped, rounds)


def _fix_key(source: SourceFile, diagnostic: Diagnostic) -> str:
    """Identifies a fix across rounds. The finding's own source text, not its line or its
    position: another fix on the same line moves it but must not make a broken fix look new
    (it would be retried, and reported as dropped, every round)."""
    assert diagnostic.fix is not None
    start = source.offset(diagnostic.location.row, diagnostic.location.column - 1)
    end = source.offset(diagnostic.end_location.row, diagnostic.end_location.column - 1)
    return diagnostic.fix.message + "|" + "|".join(e.content for e in diagnostic.fix.edits) + \
        "|" + source.text[start:end]


def _offsets(source: SourceFile, diagnostic: Diagnostic) -> list[tuple[int, int, str]]:
    assert diagnostic.fix is not None
    return [(*edit_offsets(source, e), e.content) for e in diagnostic.fix.edits]


def _non_overlapping(source: SourceFile, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    chosen: list[Diagnostic] = []
    taken: list[tuple[int, int]] = []
    seen_inserts: set[tuple[int, str]] = set()
    for diagnostic in sorted(diagnostics, key=Diagnostic.sort_key):
        spans = _offsets(source, diagnostic)
        ok = True
        for start, end, content in spans:
            if start == end and (start, content) in seen_inserts:
                continue  # two fixes adding the same import: one is enough
            for t_start, t_end in taken:
                if start < t_end and t_start < end or (start == end == t_start == t_end):
                    ok = False
                    break
            if not ok:
                break
        if not ok:
            continue
        chosen.append(diagnostic)
        for start, end, content in spans:
            if start == end:
                if (start, content) in seen_inserts:
                    continue
                seen_inserts.add((start, content))
            taken.append((start, end))
    return chosen


def _apply_individually(source: SourceFile, chosen: list[Diagnostic], path: str
                        ) -> tuple[str, list[Diagnostic], list[Diagnostic]]:
    """Find which fixes break compilation by adding them one at a time."""
    kept: list[Diagnostic] = []
    bad: list[Diagnostic] = []
    edits: list[tuple[int, int, str]] = []
    text = source.text
    for diagnostic in chosen:
        trial = edits + _offsets(source, diagnostic)
        candidate = apply_edits(source.text, _dedupe_inserts(trial))
        if compiles(candidate, path):
            edits, text = trial, candidate
            kept.append(diagnostic)
        else:
            bad.append(diagnostic)
    return text, kept, bad


def _dedupe_inserts(edits: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    seen: set[tuple[int, int, str]] = set()
    out = []
    for edit in edits:
        if edit[0] == edit[1]:
            if edit in seen:
                continue
            seen.add(edit)
        out.append(edit)
    return out

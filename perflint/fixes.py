"""Fixes: turning rules' edit plans into edits, and applying them safely.

Applying: pick the applicable fixes, drop overlapping ones, apply, check that the result
still compiles (a fix that breaks the file is dropped and the others kept), re-lint, and
repeat until nothing changes. Imports a fix needs are scheduled with libcst's
`AddImportsVisitor`, so they land where a human would put them.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Literal

from .findings import FixPlan
from .types import Applicability, Diagnostic, Edit, Fix, Location
from .wrap import wrap_edits

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


def _import_edit(text: str, modules: list[str]) -> tuple[int, int, str] | Literal[False] | None:
    """An insertion that adds `import <module>` lines; False if none is needed, None if libcst
    cannot place it.

    libcst's `AddImportsVisitor` decides where the import goes (after the existing imports,
    after `from __future__` and the docstring) and whether one is needed at all. It walks the
    whole tree it is given, so it is given the file's import header only: the leading
    docstring, comments and top-level imports (a prefix of the file), not the code after."""
    header_end, imported = _import_header(text)
    if set(modules) <= imported:
        # What AddImportsVisitor concludes for modules the header imports unaliased, without
        # importing libcst.codemod (0.18 s, more than checking most files).
        return False
    try:
        import libcst as cst
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import AddImportsVisitor
    except ImportError:  # pragma: no cover - libcst is a dependency
        return None
    header = text[:header_end]
    try:
        module = cst.parse_module(header)
    except Exception:
        return None
    context = CodemodContext()
    for name in modules:
        AddImportsVisitor.add_needed_import(context, name)
    new_header = AddImportsVisitor(context).transform_module(module).code
    if new_header == header:
        return False
    prefix = 0
    limit = min(len(header), len(new_header))
    while prefix < limit and header[prefix] == new_header[prefix]:
        prefix += 1
    # Insert at a line start so the edit reads as whole lines.
    prefix = header.rfind("\n", 0, prefix) + 1 if prefix else 0
    inserted_len = len(new_header) - len(header)
    inserted = new_header[prefix : prefix + inserted_len]
    if new_header[:prefix] + inserted + header[prefix:] != new_header:
        return None
    if prefix == len(header) and header and not header.endswith(("\n", "\r")):
        return None
    if prefix < len(text) and not inserted.endswith(("\n", "\r")):
        inserted += "\n"  # an empty header: the code that follows starts on its own line
    return (prefix, prefix, inserted)


def _import_header(text: str) -> tuple[int, set[str]]:
    """Offset just past the last top-level import of the file's leading block of docstring
    and imports (0 when the file starts with other code), and the modules that block
    imports with plain `import X` (no `as`)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return len(text), set()
    end_line = 0
    imported: set[str] = set()
    for index, stmt in enumerate(tree.body):
        is_docstring = index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
            and isinstance(stmt.value.value, str)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) or is_docstring:
            if isinstance(stmt, ast.Import):
                imported.update(alias.name for alias in stmt.names if alias.asname is None)
            end_line = stmt.end_lineno or stmt.lineno
            continue
        break
    if end_line == 0:
        return 0, imported
    offset = 0
    for _ in range(end_line):  # past the end of that line, line break included
        newline = text.find("\n", offset)
        if newline < 0:
            return len(text), imported
        offset = newline + 1
    return offset, imported


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
    line_length: int | None = None,
) -> FixOutcome:
    """Apply fixes until nothing applicable is left (at most MAX_ITERATIONS rounds).

    With `line_length`, an expression a fix inserts that would make its line longer than
    that is laid out over several lines (`perflint.wrap`); the one-line form is kept when
    the laid-out file would not compile.

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
        if line_length:
            wrapped = wrap_edits(current.text, edits, line_length)
            if wrapped != edits:
                wrapped_text = apply_edits(current.text, wrapped)
                if not originally_compiles or compiles(wrapped_text, source.path):
                    edits, text = wrapped, wrapped_text
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

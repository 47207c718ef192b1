"""Lint one file: prefilter, parse once, one walk for all rules, suppressions, positions.

The engine knows nothing rule-specific. It builds a dispatch table from the enabled rules'
`visit_<Node>` methods, runs the per-file analysis (which calls them), turns raw findings
into `Diagnostic`s and drops suppressed ones.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
import warnings
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from .facts.analysis import FileAnalysis
from .facts.hotness import is_test_file, is_transforms_file
from .facts.context import RuleContext
from .fixes import materialize_fix
from .noqa import Suppressions, parse_suppressions
from .noqa_tools import NoqaRowMap
from .registry import all_rules, is_pattern_rule
from .rule import FileError, RawFinding, Rule, SuppressionReport
from .source import DecodeFailure, SourceFile
from .types import HOT_PATH_KEY, HOT_SEED_KEY, Diagnostic, Location

# Files without any of these (or a rule's own triggers) cannot hold a finding. A hook or a
# callback class (`class LossSpikeHook(Hook)`) may name none of the others: it runs every
# step all the same and passes the outputs on to helpers in other files.
_BASE_TRIGGERS = (b"torch", b"Tensor", b"tensor", b"loader", b"cuda", b".backward(", b"Hook", b"Callback")
_MIN_RECURSION_LIMIT = 20000
# Code (comments removed) with none of these never puts anything on an accelerator itself:
# no move (`.to(`, `.cuda(`), no `device=` argument, no default device, no framework that
# places tensors for it. (A `device = torch.device("cuda")` nothing uses moves nothing.)
# Words that say a file uses an accelerator, matched in lower case: literals first (fast
# `bytes.find`), then the patterns on the text without comments.
_ACCELERATOR_LITERALS = (b".to(", b".cuda(", b"set_default_device", b"set_default_tensor_type", b"accelerat",
                         b"fabric", b"lightning", b"trainer", b"deepspeed", b"map_location")
_ACCELERATOR_PATTERN = re.compile(
    rb"[(,]\s*device\s*=|cuda\.\w*tensor|with\s+torch\.device|\b(?:xla|mps|xpu|npu|hpu|tpu)\b")
_COMMENT = re.compile(rb"#[^\n]*")


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: str | None = None
    parsed: bool = False
    # Qualified names this file calls from code that runs every step, outside torch and the
    # libraries perflint knows: how the project pass finds hot functions in other files.
    hot_calls: tuple[str, ...] = ()
    # A package's `__init__.py`: the names it imports from elsewhere (name, qualified name as
    # imported), so the project pass can follow `from pkg.utils import f` to where f is.
    reexports: tuple[tuple[str, str], ...] = ()
    # For each of `hot_calls`: the chain ("path:row what", entry point first) that makes the
    # call run every step, and the function of this file the project pass seeded at its
    # root, if any (see perflint.hot_paths).
    hot_call_origins: tuple[tuple[str, tuple[str, ...], str | None], ...] = ()
    # Calls from any code that pass a loader or an object of a project class (`f(-,L-N-)`):
    # they bind the callee's parameters in its file without making it hot.
    bound_calls: tuple[str, ...] = ()
    # Qualified names this file calls that may be functions of other project files: the
    # project pass answers with their summaries (part of this file's seeds).
    calls: tuple[str, ...] = ()
    # What this file's module-level functions and methods return, and which parameters'
    # loaders they move to a device every step ("Name=summary", see perflint.facts.summaries).
    summaries: tuple[str, ...] = ()
    # Methods of this file's classes that its hot code calls on `self` ("Class.method(sig)"):
    # a subclass in another file that overrides one runs its override every step.
    overrides: tuple[str, ...] = ()
    # This file's top-level classes and their bases that may be project classes
    # ("Class<qualified base>"): where the project pass finds those subclasses.
    bases: tuple[str, ...] = ()


_linters: dict[tuple[str, ...], "Linter"] = {}


def linter_for(rules: Sequence[type[Rule]]) -> "Linter":
    """One Linter per set of rules (its dispatch tables are built once)."""
    key = tuple(r.code for r in rules)
    linter = _linters.get(key)
    if linter is None:
        linter = _linters[key] = Linter(rules)
    return linter


class Linter:
    """Runs a fixed set of rule classes over sources."""

    def __init__(self, rules: Sequence[type[Rule]]) -> None:
        self.rule_classes = list(rules)
        self.codes = {r.code for r in self.rule_classes}
        self._walk_rules = [r for r in self.rule_classes if r.visitors()]
        # Rules that judge the suppressions (unused `noqa` codes) run after the walk.
        self._post_rules = [r for r in self.rule_classes if r.runs_after_suppressions()]
        # A file that names none of a rule's own triggers may still make another file's code
        # run every step (a training loop calling a logging helper elsewhere): with any
        # pattern rule selected, the base triggers always have a file walked.
        triggers: set[bytes] = set(_BASE_TRIGGERS) if self._walk_rules else set()
        for rule in self._walk_rules:
            triggers.update(rule.triggers or ())
        self._prefilter = (
            re.compile(b"|".join(re.escape(t) for t in sorted(triggers))) if triggers else None
        )
        if sys.getrecursionlimit() < _MIN_RECURSION_LIMIT:
            sys.setrecursionlimit(_MIN_RECURSION_LIMIT)

    # ----------------------------------------------------------------- entry points
    def may_have_findings(self, raw: bytes) -> bool:
        return self._prefilter is not None and self._prefilter.search(raw) is not None

    def lint_bytes(self, path: str, raw: bytes, hot_functions: frozenset[str] = frozenset()) -> FileResult:
        try:
            source = SourceFile.from_bytes(path, raw)
        except DecodeFailure as exc:
            return self._error_result(path, FileError(f"cannot decode file: {exc}"))
        return self.lint_source(source, hot_functions)

    def lint_source(self, source: SourceFile, hot_functions: frozenset[str] = frozenset()) -> FileResult:
        """Lint one file. `hot_functions` are its seeds from the project pass: functions that
        code in other files calls every step (they are hot here too), the arguments other
        files pass, and the summaries of the other files' functions it calls."""
        path = source.path
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes is not ours
                tree = source.parse()
        except SyntaxError as exc:
            row = exc.lineno or 1
            col = max((exc.offset or 1) - 1, 0)
            return self._error_result(path, FileError(f"syntax error: {exc.msg}", row, col))
        except (ValueError, MemoryError, RecursionError, OverflowError) as exc:
            return self._error_result(path, FileError(f"cannot parse: {_describe(exc)}"))
        result = FileResult(path, parsed=True)
        if path.endswith("__init__.py"):
            result.reexports = _reexports(tree)
        raw = source.raw if source.raw is not None else source.text.encode("utf-8", "surrogatepass")
        # A file other files call every step is walked whatever it mentions: it may only
        # pass the tensors on to a helper in a third file.
        walk = self.may_have_findings(raw) or bool(hot_functions and self._walk_rules)
        post = [r for r in self._post_rules if r.triggers is None or any(t in raw for t in r.triggers)]
        if not walk and not post:
            return result  # parsed (syntax errors are reported everywhere), nothing to analyze
        findings: list[RawFinding] = []
        try:
            if walk:
                findings, analysis = self._analyze(source, tree, [cls() for cls in self._walk_rules], hot_functions)
                cross = analysis.cross
                result.hot_calls = tuple(sorted(cross.hot_calls))
                result.overrides = tuple(sorted(cross.override_calls))
                result.hot_call_origins = _origins(source, result.hot_calls + result.overrides,
                                                   analysis.external_hot_call_origins)
                result.bound_calls = tuple(sorted(cross.bound_calls))
                result.calls = cross.asked()
                result.summaries = analysis.summaries
                result.bases = tuple(sorted(cross.class_bases))
                analysis.release()
            if findings or post:  # tokenizing for comments costs; only when something needs it
                suppressions = parse_suppressions(source.text)
                result.diagnostics = self._diagnostics(source, findings, suppressions) if findings else []
                if post:
                    result.diagnostics = self._after_suppressions(source, post, suppressions, result.diagnostics)
        except RecursionError:
            return self._error_result(path, FileError("cannot analyze: nesting too deep"))
        except Exception as exc:  # a bug of ours must not stop the run or lose the file
            return self._error_result(
                path, FileError(f"internal error while analyzing ({type(exc).__name__}: {exc}); please report it")
            )
        return result

    # ----------------------------------------------------------------- internals
    def _analyze(self, source: SourceFile, tree: ast.Module, rules: list[Rule],
                 hot_functions: frozenset[str] = frozenset()) -> tuple[list[RawFinding], FileAnalysis]:
        dispatch: dict[type, list] = {}
        hot_only: dict = {}
        per_sample: set = set()
        for rule in rules:
            for node_type, method_name in type(rule).visitors().items():
                method = getattr(rule, method_name)
                dispatch.setdefault(node_type, []).append(method)
                hot_only[method] = getattr(method, "hot_only", type(rule).hot_only)
                if type(rule).per_sample:
                    per_sample.add(method)
        raw = source.raw if source.raw is not None else source.text.encode("utf-8", "surrogatepass")
        analysis = FileAnalysis(tree, dispatch, hot_only, hot_functions=hot_functions, per_sample=per_sample,
                                test_file=is_test_file(source.path),
                                transforms_file=is_transforms_file(source.path),
                                host_only=_host_only(raw), mentions_collate_fn=b"collate_fn" in raw)
        context = RuleContext(source, analysis)
        try:
            analysis.run()
        finally:
            context.detach()
        return context.findings, analysis

    def _diagnostics(self, source: SourceFile, findings: Iterable[RawFinding],
                     suppressions: Suppressions | None = None) -> list[Diagnostic]:
        if suppressions is None:
            suppressions = parse_suppressions(source.text)
        by_code = {r.code: r for r in self.rule_classes}
        noqa_map = NoqaRowMap(source.text)
        # One finding per (code, span); when a rule reports the same span twice (once from
        # the node itself, once from an enclosing construct that knows a fix), keep the fix.
        unique: dict[tuple, Diagnostic] = {}
        nodes: dict[tuple, ast.AST] = {}
        for finding in findings:
            rule = by_code.get(finding.code)
            if rule is None:
                continue
            diagnostic = self._to_diagnostic(source, rule, finding, noqa_map)
            key = (diagnostic.code, diagnostic.location, diagnostic.end_location)
            previous = unique.get(key)
            if previous is None or _fix_rank(diagnostic) > _fix_rank(previous):
                unique[key] = diagnostic
                if finding.node is not None and rule.family == "sync":
                    nodes[key] = finding.node
        replaced = _superseded(unique, by_code)
        for key in replaced:
            nodes.pop(key, None)
        kept = {key: d for key, d in unique.items() if key not in replaced}
        out = []
        for chain in _sync_chains(kept, nodes):
            # every code of the chain is asked (a `noqa` naming any of them is used), and a
            # `noqa` of any of them silences the chain: it is one finding now; so are the
            # codes its findings replace
            asked = chain + [unique[key] for key, by in replaced.items() if any(by is d for d in chain)]
            suppressed = [suppressions.suppresses(d.code, d.noqa_row or d.location.row) for d in asked]
            if not any(suppressed):
                out.append(_one_finding(chain))
        out.sort(key=Diagnostic.sort_key)
        return out

    def _after_suppressions(self, source: SourceFile, rules: list[type[Rule]], suppressions: Suppressions,
                            diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        report = SuppressionReport(
            source=source,
            suppressions=suppressions,
            # only rules a static check runs: a run-time rule (trace) never uses a noqa here
            enabled_codes=frozenset(r.code for r in self.rule_classes if is_pattern_rule(r) or r.family == "meta"),
            known_codes=frozenset(r.code for r in all_rules()) | frozenset(self.codes),
            diagnostics=list(diagnostics),
        )
        findings = [finding for cls in rules for finding in cls().after_suppressions(report)]
        if not findings:
            return diagnostics
        return sorted(diagnostics + self._diagnostics(source, findings, suppressions), key=Diagnostic.sort_key)

    def suppressions(self, source: SourceFile) -> Suppressions:
        return parse_suppressions(source.text)

    def _to_diagnostic(self, source: SourceFile, rule: type[Rule], finding: RawFinding,
                       noqa_map: NoqaRowMap | None = None) -> Diagnostic:
        if finding.node is not None:
            row, col, end_row, end_col = source.node_span(finding.node)
        elif finding.span is not None:
            row, col = source.position_of(finding.span[0])
            end_row, end_col = source.position_of(finding.span[1])
        else:
            row, col = finding.row or 1, finding.column or 0
            end_row, end_col = row, col
        fix = materialize_fix(source, finding.fix) if finding.fix is not None else None
        extra: dict = {}
        if finding.hot_path or finding.hot_seed:  # why it runs every step (perflint.hot_paths)
            extra[HOT_PATH_KEY] = [f"{source.path}:{r} {what}" for r, what in finding.hot_path]
            if finding.hot_seed:
                extra[HOT_SEED_KEY] = finding.hot_seed
        return Diagnostic(
            code=rule.code,
            name=rule.name,
            message=finding.message,
            path=source.path,
            location=Location(row, col + 1),
            end_location=Location(end_row, end_col + 1),
            fix=fix,
            noqa_row=noqa_map(row) if noqa_map is not None else row,
            url=rule.url(),
            extra=extra,
        )

    def _error_result(self, path: str, error: FileError) -> FileResult:
        result = FileResult(path, error=error.message)
        for cls in self.rule_classes:
            finding = cls().on_file_error(error)
            if finding is None:
                continue
            row = finding.row or error.row
            col = finding.column if finding.column is not None else error.column
            result.diagnostics.append(
                Diagnostic(
                    code=cls.code,
                    name=cls.name,
                    message=finding.message,
                    path=path,
                    location=Location(row, col + 1),
                    end_location=Location(row, col + 1),
                    noqa_row=row,
                    url=cls.url(),
                )
            )
        return result


def _origins(source: SourceFile, calls: tuple[str, ...], origins: dict) -> tuple:
    """For each call into another project file, the chain ("path:row what") that makes it
    run every step, and the seeded function at its root (see perflint.hot_paths)."""
    return tuple((call, tuple(f"{source.path}:{row} {what}" for row, what in origins[call][0]), origins[call][1])
                 for call in calls if call in origins)


def _host_only(raw: bytes) -> bool:
    """No word outside comments says this file uses an accelerator."""
    low = raw.lower()
    for word in _ACCELERATOR_LITERALS:
        at = low.find(word)
        while at != -1:
            if b"#" not in low[low.rfind(b"\n", 0, at) + 1:at]:
                return False  # not in a comment
            at = low.find(word, at + 1)
    code = _COMMENT.sub(b"", low) if b"#" in low else low
    return _ACCELERATOR_PATTERN.search(code) is None


def _reexports(tree: ast.Module) -> tuple[tuple[str, str], ...]:
    """`from ._dense import to_dense_batch as tdb` -> ("tdb", "._dense.to_dense_batch"): what
    a package takes from its own submodules. (Imports from elsewhere, `from ..utils import
    _LazyModule`, are not its API; keeping the file's record empty keeps warm runs fast.)"""
    found = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                if alias.name != "*" and not alias.name.startswith("_"):
                    found.append((alias.asname or alias.name, f".{node.module}.{alias.name}"))
    return tuple(found)


def _superseded(unique: dict[tuple, Diagnostic], by_code: dict[str, type[Rule]]) -> dict[tuple, Diagnostic]:
    """The findings another finding at the same place replaces (`Rule.supersedes`), each
    with the one that replaces it."""
    at: dict[object, list[tuple]] = {}
    for key, diagnostic in unique.items():
        at.setdefault(diagnostic.location, []).append(key)
    replaced: dict[tuple, Diagnostic] = {}
    for keys in at.values():
        if len(keys) < 2:
            continue
        for key in keys:
            codes = by_code[unique[key].code].supersedes
            for other in keys:
                if unique[other].code in codes and other not in replaced:
                    replaced[other] = unique[key]
    return replaced


def _spine(node: ast.AST) -> Iterable[ast.AST]:
    """The expressions evaluated before `node` along its receiver chain, nearest first:
    for `torch.unique(x).cpu().tolist()`, the `.cpu()` call, then `torch.unique(x)`."""
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
            yield node
        else:
            return


def _sync_chains(unique: dict[tuple, Diagnostic], nodes: dict[tuple, ast.AST]) -> list[list[Diagnostic]]:
    """The findings grouped by expression: sync findings whose nodes lie on one receiver
    chain (`torch.unique(x).cpu().tolist()`: PFL212, PFL203, PFL202) form one group, the
    first to run first; every other finding is a group of its own."""
    by_node: dict[int, tuple] = {id(node): key for key, node in nodes.items()}
    head_of: dict[tuple, tuple] = {}
    for key, node in nodes.items():
        for inner in _spine(node):
            found = by_node.get(id(inner))
            if found is not None and found != key:
                head_of[key] = found  # the nearest sync this one follows
                break
    chains: dict[tuple, list[Diagnostic]] = {}
    order: list[tuple] = []
    for key, diagnostic in unique.items():
        root = key
        seen = {root}
        while root in head_of and head_of[root] not in seen:
            root = head_of[root]
            seen.add(root)
        if root not in chains:
            chains[root] = []
            order.append(root)
        chains[root].append(diagnostic)
    result = []
    for root in order:
        chain = chains[root]
        head = unique[root]
        rest = sorted((d for d in chain if d is not head), key=lambda d: (d.end_location.row, d.end_location.column))
        result.append([head, *rest])
    return result


def _one_finding(chain: list[Diagnostic]) -> Diagnostic:
    """A chain of syncs in one expression, reported once, at the first: what follows is
    listed in its message (and its fix is kept when the first has none)."""
    head, rest = chain[0], chain[1:]
    if not rest:
        return head
    listed = ", ".join(f"{d.code} ({d.name})" for d in rest)
    message = f"{head.message}; the same expression then syncs again: {listed}"
    fix = head.fix
    if fix is None:
        fix = next((d.fix for d in rest if d.fix is not None), None)
    return dataclasses.replace(head, message=message, fix=fix)


def _fix_rank(diagnostic: Diagnostic) -> int:
    return -1 if diagnostic.fix is None else diagnostic.fix.applicability.rank


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.replace("\x00", "\\0")

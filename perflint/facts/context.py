"""What a rule sees: the node it asked for, and answers to the shared questions."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..findings import FixPlan, RawFinding
from ..rewrite import rewrite_expression
from ..types import Applicability
from .file_facts import FileFacts
from .frame import Frame
from .host_use import DeviceFlow
from .syntax import child_nodes, walk_nodes
from .values import Kind, Value

if TYPE_CHECKING:
    from ..source import SourceFile


# What sits in a block (a statement's body, handlers, cases): their parents are found
# without visiting any expression.
_BLOCK_PARTS = (ast.stmt, ast.excepthandler, ast.match_case)
_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _block_parents(tree: ast.Module) -> dict[ast.AST, ast.AST]:
    parents: dict[ast.AST, ast.AST] = {}
    stack: list[ast.AST] = [tree]
    while stack:
        outer = stack.pop()
        for name in _BLOCK_FIELDS:
            for child in getattr(outer, name, ()):
                parents[child] = outer
                stack.append(child)
    return parents


class RuleContext:
    def __init__(self, source: SourceFile, analysis: FileFacts) -> None:
        self.source = source
        self.analysis = analysis
        self.findings: list[RawFinding] = []
        self._walker: Frame | None = None
        self._rule: object = None
        self._code = ""
        self.node: ast.AST | None = None
        self._parents: dict[ast.AST, ast.AST] | None = None
        self._block_parents: dict[ast.AST, ast.AST] | None = None
        self._device_flow: DeviceFlow | None = None  # built on the first `reaches_host`
        analysis.context = self

    def detach(self) -> None:
        """Drop the links back to the analysis once it has run: without the cycle the
        file's tree and facts are freed as soon as their last user lets go, not by a pass
        of the cyclic collector over every node."""
        self.analysis.context = None
        self._walker = None
        self._rule = None
        self.node = None
        self._device_flow = None

    def _enter(self, visitor: object, node: ast.AST) -> None:
        self._rule = getattr(visitor, "__self__", None)
        self._code = getattr(self._rule, "code", "")
        self.node = node

    # ----------------------------------------------------------------- facts
    @property
    def hot(self) -> bool:
        """Does the current node run every training / inference step?"""
        return bool(self._walker and self._walker.hot)

    @property
    def per_sample(self) -> bool:
        """Does the current node run for every sample in the data pipeline (and not in a step)?"""
        return bool(self._walker and self._walker.per_sample and not self._walker.hot)

    @property
    def imports_torch(self) -> bool:
        return self.analysis.imports_torch

    @property
    def function_name(self) -> str:
        return self._walker.func.name if self._walker else "<module>"

    @property
    def function_node(self) -> ast.AST | None:
        """The function (or the module) whose body is being walked."""
        return self._walker.func.node if self._walker else None

    @property
    def module_node(self) -> ast.Module:
        """The file's whole tree: for a set-up call looked for anywhere in the file."""
        return self.analysis.tree

    @property
    def statement(self) -> ast.stmt | None:
        return self._walker.stmt if self._walker else None

    @property
    def in_loop(self) -> bool:
        return bool(self._walker and self._walker.loops)

    @property
    def in_inference_loop(self) -> bool:
        """Inside a loop of this function that runs the model but never runs the backward
        pass or steps an optimizer (itself or through what it calls): an evaluation or
        inference loop, in a function that does not train."""
        walker = self._walker
        if walker is None or not walker.loops or walker.func.trains:
            return False
        return any(loop.direct_markers or loop.nested_markers for loop in walker.loops) \
            and not any(loop.update_markers for loop in walker.loops)

    def parent(self, node: ast.AST) -> ast.AST | None:
        """The syntactic parent of `node` (None for the module)."""
        statement = self.statement
        if statement is not None and node is not statement:
            # Usually an expression of the statement being walked: search just its expressions.
            for part in child_nodes(statement):
                if isinstance(part, ast.stmt):
                    continue
                for outer in walk_nodes(part):
                    for child in child_nodes(outer):
                        if child is node:
                            return outer
                if part is node:
                    return statement
        if isinstance(node, _BLOCK_PARTS):  # a statement: a map of the blocks only, once
            if self._block_parents is None:
                self._block_parents = _block_parents(self.analysis.tree)
            return self._block_parents.get(node)
        if self._parents is None:  # an expression elsewhere: a map of the whole file, once
            self._parents = {
                child: outer
                for outer in walk_nodes(self.analysis.tree)
                for child in child_nodes(outer)
            }
        return self._parents.get(node)

    def value(self, node: ast.expr) -> Value:
        assert self._walker is not None
        return self._walker.value(node)

    def qualname(self, node: ast.expr) -> str | None:
        assert self._walker is not None
        return self._walker.qualname(node)

    # The tensor questions below are about tensors that may live on an accelerator: a tensor
    # known to be in host memory (made by a factory without `device=`, or moved with
    # `.cpu()`) never makes the host wait for a GPU.
    def is_tensor(self, node: ast.expr) -> bool:
        value = self.value(node)
        return value.kind is Kind.TENSOR and not value.on_cpu

    def is_bool_tensor(self, node: ast.expr) -> bool:
        value = self.value(node)
        return value.is_bool_tensor and not value.on_cpu

    def maybe_tensor(self, node: ast.expr) -> bool:
        """A tensor (or a batch), or a value we cannot classify in a file that uses torch.

        For tensor-only methods (`.item()`, `.cpu()`): numpy and Python values are known to
        the analyzer, so an unknown receiver in a torch file is most likely a tensor.
        """
        value = self.value(node)
        if value.kind is Kind.TENSOR or value.kind is Kind.BATCH:
            return not value.on_cpu
        return value.kind is Kind.UNKNOWN and self.imports_torch

    def reaches_host(self, node: ast.expr) -> bool:
        """Would the value of `node`, kept on the device, be read to the host again as often
        as it is made (`if v:`, `int(v)`, `f"{v}"`, `lst[v]`, a non-torch call...)? A fix
        that turns a host read into a tensor removes the sync only when this is False."""
        flow = self._device_flow
        if flow is None:
            flow = self._device_flow = DeviceFlow(self.analysis.tree)

        def is_tensor(expr: ast.expr) -> bool:
            return self.value(expr).kind in (Kind.TENSOR, Kind.BATCH)

        return flow.reaches_host(node, self.qualname, is_tensor)

    def loaders_fed_by(self, call: ast.Call) -> list[ast.Call]:
        """The `DataLoader(...)` calls of this file whose loaders `call` hands to a function
        of another file that moves their batches to a device every step; for a
        `DataLoader(...)` call whose loader a function returns to such a caller, itself."""
        return self.analysis.cross.fed.get(call, [])

    def call_name(self, call: ast.Call) -> str | None:
        """Qualified name of a call to a module-level function (`T.nonzero` -> torch.nonzero)."""
        return self.qualname(call.func)

    def library_class(self, call: ast.Call) -> tuple[str, bool] | None:
        """For a call to a class of this file derived from a class of another module
        (`class FixedCategorical(torch.distributions.Categorical)`, through its bases in this
        file): (that class's qualified name, whether a class of this file on the way defines
        `__init__`, so the call's arguments may not be the library constructor's)."""
        value = self.value(call.func)
        cls = self.analysis.classes.get(value.ref or "") if value.kind is Kind.CLASS else None
        if cls is None:
            return None
        own_init = any("__init__" in local.methods for local in cls.lineage())
        for local in cls.lineage():
            for base in local.base_names:
                head, _, rest = base.partition(".")
                bound = self.analysis.module_env.get(head)
                if bound is not None and bound.kind is Kind.REF and bound.ref:
                    return (f"{bound.ref}.{rest}" if rest else bound.ref), own_init
        return None

    def method_call(self, call: ast.Call, *names: str) -> tuple[ast.expr, str] | None:
        """(receiver, method) for `x.m(...)` or `torch.Tensor.m(x, ...)` with m in `names`."""
        func = call.func
        if not isinstance(func, ast.Attribute) or (names and func.attr not in names):
            return None
        qual = self.qualname(func)
        if qual is not None:
            if qual.startswith("torch.Tensor.") and call.args:
                return call.args[0], func.attr
            return None
        return func.value, func.attr

    def torch_alias(self) -> str | None:
        """The local name bound to the `torch` module by an import, if any (`torch`
        preferred); None when nothing binds it (an unimported `torch` in a snippet)."""
        walker = self._walker
        envs = [walker.env, *walker._outer] if walker is not None else []
        envs.append(self.analysis.module_env)
        for env in envs:
            value = env.get("torch")
            if value is not None and value.kind is Kind.REF and value.ref == "torch":
                return "torch"
        for env in envs:
            for name, value in env.items():
                if value.kind is Kind.REF and value.ref == "torch":
                    return name
        return None

    # ----------------------------------------------------------------- source
    def text(self, node: ast.AST) -> str:
        return self.source.segment(node)

    def offsets(self, node: ast.AST) -> tuple[int, int]:
        return self.source.node_offsets(node)

    # ----------------------------------------------------------------- reporting
    def report(self, node: ast.AST, message: str | None = None, *, fix: FixPlan | None = None,
               **fmt: object) -> None:
        rule = self._rule
        template = message if message is not None else getattr(rule, "message", "")
        text = template.format(**fmt) if fmt else template
        finding = RawFinding(code=self._code, message=text, node=node, fix=fix)
        walker = self._walker
        if walker is not None and walker.hot:
            finding.hot_path, finding.hot_seed = walker.hot_origin
        self.findings.append(finding)

    def fix(self, applicability: Applicability, message: str, edits: list[tuple[int, int, str]],
            imports: list[str] | None = None) -> FixPlan:
        return FixPlan(applicability, message, edits, imports or [])

    def replace(self, node: ast.AST, text: str) -> tuple[int, int, str]:
        start, end = self.offsets(node)
        return (start, end, text)

    def insert_at(self, offset: int, text: str) -> tuple[int, int, str]:
        return (offset, offset, text)

    def rewrite(self, node: ast.AST, transform) -> tuple[int, int, str]:
        """An edit that rewrites `node`'s source with a libcst transform, keeping formatting.

        `transform` receives the libcst expression for the node's text and returns the new
        one; raises `perflint.rewrite.RewriteError` when the text cannot be parsed.
        """
        start, end = self.offsets(node)
        return (start, end, rewrite_expression(self.source.text[start:end], transform))

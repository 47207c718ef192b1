"""Tensors built on the host from factories only, for the rules that report their copy to
the device (create-then-move, PFL101; implicit-host-to-device-copy, PFL109).

`torch.arange(n).unsqueeze(0)`, `torch.cat([torch.arange(b) for _ in range(k)])`,
`(labels[None] == labels[:, None]).float()` after `labels = torch.arange(b)`: every tensor
in them comes from a factory without `device=`, so all of it could be made on the device,
and none of it is data (a batch, an array from a file) that has to cross. The walk is
structural and strict: an operand it does not know to be host-built or a Python value
makes the whole expression unknown.
"""

from __future__ import annotations

import ast
from typing import TypeGuard

from perflint.facts.context import RuleContext
from perflint.facts.values import Kind

from ._moves import keyword, root_name

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)

# Factories that build a tensor from sizes or ranges, on the host unless given `device=`.
HOST_FACTORIES = frozenset({
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "linspace",
    "logspace", "eye", "tril_indices", "triu_indices",
})
_VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
_JOINS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.stack", "torch.hstack",
                    "torch.vstack"})
# One-tensor functions: what they make of a host tensor stays on the host.
_ELEMENTWISE = frozenset(f"torch.{name}" for name in (
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "sqrt", "rsqrt", "sigmoid",
    "tanh", "abs", "neg", "reciprocal", "floor", "ceil", "round", "square", "triu", "tril", "flip", "roll",
    "cumsum", "outer", "meshgrid", "repeat_interleave", "where", "logical_not", "logical_and", "logical_or"))
# Tensor methods that keep a host tensor on the host (shape, dtype and elementwise ones).
_METHODS = frozenset({
    "unsqueeze", "squeeze", "view", "reshape", "expand", "repeat", "repeat_interleave", "t", "transpose",
    "permute", "flatten", "triu", "tril", "clone", "contiguous", "flip", "roll", "cumsum", "float", "long",
    "int", "bool", "half", "double", "short", "byte", "bfloat16", "masked_fill", "fill_diagonal_", "exp", "log",
    "sqrt", "abs", "neg", "clamp", "clamp_min", "clamp_max", "fmod", "remainder", "pow", "mul", "add", "sub",
    "div", "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "sum", "mean", "max", "min", "outer", "fill_",
    "zero_",
})
# In-place fills: whatever the value (`fill_(self.pad_idx)`), the tensor stays where it was made.
_FILLS = frozenset({"fill_", "fill_diagonal_"})
# `torch.FloatTensor(b, h)`: a legacy constructor given sizes (Python ints) builds an
# uninitialised host tensor, like `torch.empty`.
_LEGACY_SIZED = frozenset({"FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
                           "ByteTensor", "CharTensor", "BoolTensor", "Tensor"})
# Tensor methods that take only the shape of their tensor argument: `expand_as(scores)` of a
# host tensor stays on the host whatever `scores` is.
_SHAPE_OF_ARGUMENT = frozenset({"expand_as", "view_as", "reshape_as"})
_MAX_DEPTH = 6


def scope_walk(scope: ast.AST):
    """The nodes of one scope: nested functions, classes and lambdas are not entered."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))


def binds(node: ast.AST, name: str) -> bool:
    """Does `node` (a statement, searched whole) bind `name` in its scope?"""
    for child in [node, *scope_walk(node)]:
        if isinstance(child, ast.Name) and child.id == name and not isinstance(child.ctx, ast.Load):
            return True
        if isinstance(child, _SCOPES[:2] + (ast.ClassDef,)) and child.name == name:
            return True
        if isinstance(child, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split(".")[0]) == name for a in child.names):
            return True
        if isinstance(child, (ast.Global, ast.Nonlocal)) and name in child.names:
            return True
        if isinstance(child, ast.ExceptHandler) and child.name == name:
            return True
    return False


def reaching_assignment(name: str, ctx: RuleContext, start: ast.stmt | None = None,
                        calls_only: bool = True) -> ast.Assign | None:
    """The `name = <value>` statement that surely gave `name` its value at `start` (default:
    the current statement): the last earlier statement of an enclosing block that binds
    `name`, when it is a plain assignment (of a call, with `calls_only`); None when that is
    not clear (a parameter, a branch, a loop or a `try` that may have rebound it)."""
    found = reaching_assignments(name, ctx, start, calls_only, branches=False)
    return found[0] if found else None


def reaching_assignments(name: str, ctx: RuleContext, start: ast.stmt | None = None,
                         calls_only: bool = True, branches: bool = True) -> list[ast.Assign]:
    """`reaching_assignment`, and with `branches` the last plain assignment of each branch of
    an `if`/`else` that binds `name` on both (stargan-v2's `if up: head = torch.arange(H - N)
    + N ... else: head = torch.arange(N) + (H - N)`); [] when that is not clear."""
    binder = _binding_statement(name, ctx, start)
    if _plain_assignment(binder, calls_only):
        return [binder]
    if not (branches and isinstance(binder, ast.If) and binder.orelse):
        return []
    found: list[ast.Assign] = []
    for block in (binder.body, binder.orelse):
        last = [stmt for stmt in block if binds(stmt, name)]
        if not last or any(isinstance(stmt, (*_LOOPS, ast.Try)) for stmt in block):
            return []
        assignment = last[-1]
        if not _plain_assignment(assignment, calls_only):
            return []
        found.append(assignment)
    return found


def _plain_assignment(stmt: ast.AST | None, calls_only: bool) -> TypeGuard[ast.Assign]:
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
        and (isinstance(stmt.value, ast.Call) or not calls_only)


def _binding_statement(name: str, ctx: RuleContext, start: ast.stmt | None) -> ast.stmt | None:
    """The last earlier statement of an enclosing block that binds `name`, when no loop,
    `try` or `with` around `start` may have rebound it since."""
    scope = ctx.function_node
    node: ast.AST | None = start if start is not None else ctx.statement
    while node is not None and node is not scope:
        parent = ctx.parent(node)
        if parent is None or (isinstance(parent, _SCOPES) and parent is not scope):
            return None
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if not isinstance(block, list):
                continue
            index = next((i for i, s in enumerate(block) if s is node), None)
            if index is None:
                continue
            for previous in reversed(block[:index]):
                if binds(previous, name):
                    return previous
            if field != "body" and isinstance(parent, (*_LOOPS, ast.Try)) and binds(parent, name):
                return None  # `else:` / `finally:` after a body that may have rebound it
            break
        if isinstance(parent, ast.ExceptHandler) and (parent.name == name or binds(ctx.parent(parent) or parent, name)):
            return None  # the `try` body may have rebound it before raising
        if isinstance(parent, _LOOPS) and binds(parent, name):
            return None  # a later statement of the loop (or its target) may have rebound it
        if isinstance(parent, (ast.With, ast.AsyncWith)) and any(
                item.optional_vars is not None and binds(item.optional_vars, name) for item in parent.items):
            return None
        node = parent
    return None


def host_factory_call(node: ast.expr, ctx: RuleContext) -> ast.Call | None:
    """`torch.<factory>(...)` without `device=` (or `out=`) that the analysis places on the
    host: the call, else None."""
    if not isinstance(node, ast.Call):
        return None
    qualname = ctx.call_name(node) or ""
    if qualname[6:] in _LEGACY_SIZED and qualname.startswith("torch.") and node.args and not node.keywords:
        if len(node.args) == 1 and _is_range(node.args[0], ctx):
            return node  # `torch.LongTensor(range(n))`: `torch.arange(n)`, made on the host
        return node if all(_python(a, ctx) for a in node.args) else None  # sizes, not data
    if not qualname.startswith("torch.") or qualname[6:] not in HOST_FACTORIES:
        return None
    if keyword(node, "device") is not None or keyword(node, "out") is not None:
        return None
    return node if ctx.value(node).on_cpu else None


def host_built(node: ast.expr, ctx: RuleContext, names: bool = False, statement: ast.stmt | None = None,
               depth: int = 0, assumed: dict[str, ast.Call] | None = None) -> ast.Call | None:
    """The first host factory `node` is built from, when every tensor in it is built on the
    host from factories (and the rest are Python values); None otherwise. `names`: follow a
    name to the assignment that surely reaches it (from `statement`, default the current one)."""
    if depth > _MAX_DEPTH:
        return None
    deeper = depth + 1
    factory = host_factory_call(node, ctx)
    if factory is not None:
        return factory
    if isinstance(node, ast.Name):
        if not names:
            return None
        if assumed and node.id in assumed:  # a value written into the tensor reads it
            return assumed[node.id]
        first = None
        assignments = reaching_assignments(node.id, ctx, statement, calls_only=False)
        for assignment in assignments:
            made = host_built(assignment.value, ctx, names, assignment, deeper, assumed)
            if made is None or not written_host_built_only(node.id, assignment, made, ctx, deeper, assumed):
                return None
            first = first or made
        return first
    if isinstance(node, ast.Subscript):
        made = host_built(node.value, ctx, names, statement, deeper, assumed)
        return made if made is not None and _python_index(node.slice, ctx) else None
    if isinstance(node, ast.UnaryOp):
        return host_built(node.operand, ctx, names, statement, deeper, assumed)
    if isinstance(node, (ast.BinOp, ast.Compare)):
        sides = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.left, *node.comparators]
        return _all_host_or_python(sides, ctx, names, statement, deeper, assumed)
    if isinstance(node, ast.Call):
        return _host_built_call(node, ctx, names, statement, deeper, assumed)
    return None


def written_host_built_only(name: str, assignment: ast.Assign, made: ast.Call, ctx: RuleContext, depth: int = 0,
                            assumed: dict[str, ast.Call] | None = None) -> bool:
    """Whatever is written into `name` in place after `assignment` (`ids[..., 1] = ids[..., 1] +
    torch.arange(h)[:, None]`, `ids += 1`) is built on the host too, or a Python value: a
    batch value written into it would be data that has to cross anyway. `made`: the factory
    the assignment built it with."""
    scope = ctx.function_node
    if scope is None:
        return False
    start = (assignment.lineno, assignment.col_offset)
    inside = {**(assumed or {}), name: made}
    for node in scope_walk(scope):
        if not isinstance(node, (ast.Assign, ast.AugAssign)) or (node.lineno, node.col_offset) <= start:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        written = any(isinstance(t, ast.Subscript) and root_name(t) == name for t in targets) or (
            isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name)
        if written and not (_python(node.value, ctx)
                            or host_built(node.value, ctx, True, node, depth + 1, inside) is not None):
            return False
    return True


def _host_built_call(node: ast.Call, ctx: RuleContext, names: bool, statement: ast.stmt | None,
                     depth: int, assumed: dict[str, ast.Call] | None) -> ast.Call | None:
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        return None
    if any(k.arg in ("device", "out") for k in node.keywords):
        return None
    qualname = ctx.call_name(node) or ""
    if qualname in _VARIABLE and node.args:  # (torch < 0.4) the tensor itself
        return host_built(node.args[0], ctx, names, statement, depth, assumed)
    if qualname in _JOINS and node.args:
        parts = node.args[0]
        if isinstance(parts, (ast.List, ast.Tuple)) and parts.elts:
            return _all_host(parts.elts, ctx, names, statement, depth, assumed)
        if isinstance(parts, (ast.ListComp, ast.GeneratorExp)):
            return host_built(parts.elt, ctx, names, statement, depth, assumed)
        return None
    if qualname in _ELEMENTWISE and node.args:
        return _all_host_or_python(list(node.args), ctx, names, statement, depth, assumed)
    if isinstance(node.func, ast.Attribute) and node.func.attr in _SHAPE_OF_ARGUMENT and len(node.args) == 1:
        return host_built(node.func.value, ctx, names, statement, depth, assumed)
    if isinstance(node.func, ast.Attribute) and node.func.attr in _METHODS:
        made = host_built(node.func.value, ctx, names, statement, depth, assumed)
        if made is None:
            return None
        if node.func.attr in _FILLS:
            return made  # one value written everywhere: the tensor could be made on the device all the same
        arguments = [*node.args, *(k.value for k in node.keywords)]
        return made if all(_python(a, ctx) or host_built(a, ctx, names, statement, depth, assumed) is not None
                           for a in arguments) else None
    return None


def _all_host(parts: list[ast.expr], ctx: RuleContext, names: bool, statement: ast.stmt | None,
              depth: int, assumed: dict[str, ast.Call] | None) -> ast.Call | None:
    found = [host_built(p, ctx, names, statement, depth, assumed) for p in parts]
    return found[0] if all(f is not None for f in found) else None


def _all_host_or_python(parts: list[ast.expr], ctx: RuleContext, names: bool, statement: ast.stmt | None,
                        depth: int, assumed: dict[str, ast.Call] | None) -> ast.Call | None:
    """At least one part built on the host, the others Python values."""
    first = None
    for part in parts:
        made = host_built(part, ctx, names, statement, depth, assumed)
        if made is None and not _python(part, ctx):
            return None
        first = first or made
    return first


def _is_range(node: ast.expr, ctx: RuleContext) -> bool:
    """`range(n)`, `list(range(n))`."""
    if isinstance(node, ast.Call) and ctx.call_name(node) == "builtins.list" and len(node.args) == 1:
        node = node.args[0]
    return isinstance(node, ast.Call) and ctx.call_name(node) == "builtins.range" \
        and all(_python(a, ctx) for a in node.args)


def _python(node: ast.expr, ctx: RuleContext) -> bool:
    """A Python value (a number, a string, None, a dtype): never a tensor."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True
    return ctx.value(node).kind in (Kind.PYTHON, Kind.DTYPE)


def _python_index(index: ast.expr, ctx: RuleContext) -> bool:
    """`[None]`, `[:, None]`, `[0]`, `[i:j]`: an index of Python values only."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    for part in parts:
        if isinstance(part, ast.Slice):
            if not all(p is None or _python(p, ctx) for p in (part.lower, part.upper, part.step)):
                return False
        elif not (isinstance(part, ast.Constant) or _python(part, ctx)):
            return False
    return True

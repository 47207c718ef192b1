"""Small syntactic helpers shared by the sync rules: reading call arguments, literals, and
building replacement text that keeps evaluation order and precedence intact."""

from __future__ import annotations

import ast
from typing import Callable

from perflint.facts.context import RuleContext
from perflint.facts.torch_api import has_star_args
from perflint.facts.values import Kind

NOT_LITERAL = object()  # `literal()` of an expression whose value is not known statically


def argument(call: ast.Call, index: int | None, name: str) -> ast.expr | None:
    """The expression passed for parameter `name` (keyword, or positional `index`)."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if index is not None and index < len(call.args):
        for arg in call.args[: index + 1]:
            if isinstance(arg, ast.Starred):
                return None
        return call.args[index]
    return None


def literal(node: ast.expr | None) -> object:
    """The value of a literal (`1`, `-1`, `0.5`, `True`, `None`), else NOT_LITERAL."""
    if isinstance(node, ast.Constant):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, (ast.USub, ast.UAdd))
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) in (int, float)
    ):
        value = node.operand.value
        assert isinstance(value, (int, float))
        return -value if isinstance(node.op, ast.USub) else value
    return NOT_LITERAL


def opaque_arguments(call: ast.Call) -> bool:
    """`f(*args)` / `f(**kwargs)`: which parameter gets what is unknown."""
    return has_star_args(call)


def only_parameters(call: ast.Call, allowed: dict[str, int | None]) -> bool:
    """True when every argument is one of `allowed` (name -> positional index or None)."""
    if opaque_arguments(call):
        return False
    max_positional = max((i for i in allowed.values() if i is not None), default=-1)
    if len(call.args) > max_positional + 1:
        return False
    return all(kw.arg in allowed for kw in call.keywords)


# --------------------------------------------------------------------------- text
_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.List, ast.Dict, ast.Set,
          ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.JoinedStr)
# Operands of a comparison or of `+`/`*` that need no parentheses.
_TIGHT = _ATOMS + (ast.Constant, ast.Await)


def receiver_text(ctx: RuleContext, node: ast.expr) -> str:
    """`node`'s source, parenthesized when needed to call a method on it."""
    text = ctx.text(node)
    if isinstance(node, _ATOMS) and "\n" not in text:
        return text
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" not in text:
        return text
    return f"({text})"


def operand_text(ctx: RuleContext, node: ast.expr, comparison: bool = False) -> str:
    """`node`'s source as an operand of an arithmetic operator (or of a comparison, where
    any arithmetic binds tighter)."""
    text = ctx.text(node)
    if "\n" in text:
        return f"({text})"
    if isinstance(node, _TIGHT) or (comparison and isinstance(node, ast.BinOp)):
        return text
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
        return text
    return f"({text})"


def argument_text(ctx: RuleContext, node: ast.expr) -> str:
    """`node`'s source as a call argument (a bare tuple or walrus needs parentheses)."""
    text = ctx.text(node)
    if isinstance(node, (ast.Tuple, ast.NamedExpr)) and not text.startswith("("):
        return f"({text})"
    return text


def is_simple(node: ast.expr) -> bool:
    """A name or a chain of attributes on one: evaluating it twice is harmless."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def bind_once(ctx: RuleContext, node: ast.expr, param: str, body: Callable[[str], str]) -> str:
    """An expression computing `body(<node>)` that evaluates `node` exactly once.

    A simple name is repeated as is; anything else is bound to a lambda parameter:
    `(lambda s: <body(s)>)(<node>)`.
    """
    if is_simple(node) and "\n" not in ctx.text(node):
        return body(ctx.text(node))
    return f"(lambda {param}: {body(param)})({argument_text(ctx, node)})"


def torch_prefix(ctx: RuleContext) -> tuple[str, list[str]]:
    """The name to spell `torch` with in a fix, and the imports that needs."""
    alias = ctx.torch_alias()
    if alias is None or alias == "torch":
        return "torch", ["torch"]
    return alias, []


def statement_line_bounds(ctx: RuleContext, stmt: ast.stmt) -> tuple[int, int] | None:
    """Offsets of the whole lines holding `stmt` (line break included), when nothing else but
    a trailing comment shares them, so that deleting them deletes exactly this statement."""
    source = ctx.source
    text, starts = source.text, source.line_starts
    start, end = ctx.offsets(stmt)
    first_row, _ = source.position_of(start)
    last_row, _ = source.position_of(end)
    line_start = starts[first_row - 1]
    line_end = starts[last_row] if last_row < len(starts) else len(text)
    if text[line_start:start].strip():
        return None
    rest = text[end:line_end].strip()
    if rest and not rest.startswith("#"):
        return None
    return line_start, line_end


# --------------------------------------------------------------------------- values
def device_input(ctx: RuleContext, node: ast.expr | None) -> bool:
    """An argument of a torch function that may be a tensor on an accelerator: anything but
    a value known not to be a tensor or known to live on the CPU."""
    if node is None:
        return False
    value = ctx.value(node)
    return value.maybe_tensor and not value.on_cpu


def device_tensor(ctx: RuleContext, node: ast.expr) -> bool:
    """A receiver known to be a tensor (or a batch of them) that may live on an accelerator.

    For methods that other libraries share (`.unique()` on a pandas Series, `.inverse()` on
    a transform object), an unknown receiver is not enough.
    """
    value = ctx.value(node)
    return value.kind in (Kind.TENSOR, Kind.BATCH) and not value.on_cpu

"""Shared call-shape helpers for the data-movement rules: what a `.cuda()` / `.to(...)` /
`.type_as(...)` call does, read from its arguments and the analyzer's values.

These only parse call syntax; whether an expression is a tensor, a device or a batch is
always asked of the shared facts (`RuleContext.value`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from perflint.facts.context import RuleContext
from perflint.facts.hints import hint_for_name
from perflint.facts.torch_api import classify_device, is_dtype_expr, names_a_device
from perflint.facts.torch_api import keyword as keyword_value  # the argument, not the `keyword` node
from perflint.facts.values import Kind

# `t.half()` and friends: the dtype each cast method gives.
CAST_METHODS = {
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "bfloat16": "bfloat16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "char": "int8",
    "byte": "uint8",
    "bool": "bool",
    "cfloat": "complex64",
    "cdouble": "complex128",
}


@dataclass(frozen=True)
class Move:
    """A host-to-device move: `x.cuda(...)`, `x.to(<device>...)` or `x.type_as(<tensor>)`."""

    call: ast.Call
    receiver: ast.expr
    method: str
    device: str | None  # source text for `device=`, or None when it cannot be written
    dtype: str | None  # source text for `dtype=` when the move also casts
    non_blocking: ast.expr | None  # the non_blocking argument, when given
    fixable: bool  # False when an argument (copy=, memory_format=, *args) blocks a rewrite


def is_pure(node: ast.expr) -> bool:
    """A name or a dotted attribute of one: evaluating it twice is harmless."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def has_star(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw
    return None


def is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def is_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def is_dtype(node: ast.expr, ctx: RuleContext) -> bool:
    return is_dtype_expr(node, ctx.qualname, ctx.value)


def device_target(node: ast.expr, ctx: RuleContext) -> str | None:
    """"cpu", "accel" or "unknown" when `node` is clearly a device; None when it is not one."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return classify_device(node.value)
        return None
    if isinstance(node, ast.Call) and ctx.qualname(node.func) == "torch.device":
        if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            return classify_device(node.args[0].value) or "unknown"
        return "unknown"
    value = ctx.value(node)
    if value.kind is Kind.DEVICE:
        return value.device or "unknown"
    if value.kind is Kind.PYTHON and value.ref is None and names_a_device(node):
        return "unknown"  # a device index or name the program computed (`rank % torch.cuda.device_count()`)
    if value.kind is Kind.REF and value.ref and not value.ref.startswith("torch."):
        # `cfg.GLOBAL.DEVICE`, `from config import DEVICE`: what a config module holds, by its name
        hinted = hint_for_name(value.ref.rpartition(".")[2])
        if hinted is not None and hinted.kind is Kind.DEVICE:
            return "unknown"
    return None


def maybe_accel_tensor(node: ast.expr, ctx: RuleContext) -> bool:
    value = ctx.value(node)
    return value.kind in (Kind.TENSOR, Kind.BATCH) and not value.on_cpu


def _cuda_device_text(node: ast.expr, ctx: RuleContext) -> str | None:
    """`device=` text equivalent to `.cuda(node)`."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return f'"cuda:{node.value}"'
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and classify_device(node.value) == "accel":
        return ctx.text(node)
    if ctx.value(node).kind is Kind.DEVICE:
        return ctx.text(node)
    return None


def device_move(call: ast.Call, ctx: RuleContext) -> Move | None:
    """The move `call` makes, or None when it is not a move that may reach an accelerator."""
    method = ctx.method_call(call, "cuda", "to", "type_as", "type")
    if method is None:
        return None
    receiver, name = method
    # `torch.Tensor.to(x, ...)`: the receiver is the first argument.
    args = list(call.args[1:]) if receiver is not getattr(call.func, "value", None) else list(call.args)
    star = has_star(call)
    if name == "type":  # `imgs.type(Tensor)` with `Tensor = torch.cuda.FloatTensor` (torch < 0.4 code)
        if not args or not (ctx.qualname(args[0]) or "").startswith("torch.cuda."):
            return None
        nb = keyword(call, "non_blocking")
        return Move(call, receiver, name, '"cuda"', None, nb.value if nb else (args[1] if len(args) > 1 else None),
                    False)
    if name == "cuda":
        device_arg = args[0] if args else keyword_value(call, "device")
        flag = keyword_value(call, "non_blocking") or (args[1] if len(args) > 1 else None)
        device = '"cuda"' if device_arg is None else _cuda_device_text(device_arg, ctx)
        fixable = not star and keyword(call, "memory_format") is None
        return Move(call, receiver, name, device, None, flag, fixable)
    if name == "type_as":
        if len(args) != 1 or call.keywords:
            return None
        other = args[0]
        if not maybe_accel_tensor(other, ctx):
            return None
        pure = is_pure(other)
        text = ctx.text(other)
        return Move(call, receiver, name, f"{text}.device.type" if pure else None,
                    f"{text}.dtype" if pure else None, None, pure and not star)
    # .to(...): to(device, dtype, non_blocking, copy), to(dtype, non_blocking, copy),
    # to(other, non_blocking, copy), or keywords.
    device_node: ast.expr | None = None
    dtype_text: str | None = None
    non_blocking: ast.expr | None = None
    copy: ast.expr | None = None
    device_text: str | None = None
    to_other = False  # `.to(other_tensor)`: a move even when it cannot be rewritten
    if args:
        first = args[0]
        if is_dtype(first, ctx):
            dtype_text = ctx.text(first)
            non_blocking = args[1] if len(args) > 1 else None
            copy = args[2] if len(args) > 2 else None
        elif device_target(first, ctx) is not None:
            device_node = first
            dtype_text = ctx.text(args[1]) if len(args) > 1 else None
            non_blocking = args[2] if len(args) > 2 else None
            copy = args[3] if len(args) > 3 else None
        elif ctx.value(first).kind in (Kind.TENSOR, Kind.BATCH):
            if not maybe_accel_tensor(first, ctx):
                return None
            pure, to_other = is_pure(first), True
            text = ctx.text(first)
            device_text = f"{text}.device" if pure else None
            dtype_text = f"{text}.dtype" if pure else None
            non_blocking = args[1] if len(args) > 1 else None
            copy = args[2] if len(args) > 2 else None
        else:
            return None
    kw_device = keyword(call, "device")
    if kw_device is not None:
        device_node = kw_device.value
        if device_target(device_node, ctx) is None:
            return None
    kw_dtype = keyword(call, "dtype")
    if kw_dtype is not None:
        dtype_text = ctx.text(kw_dtype.value)
    kw_nb = keyword(call, "non_blocking")
    if kw_nb is not None:
        non_blocking = kw_nb.value
    kw_copy = keyword(call, "copy")
    if kw_copy is not None:
        copy = kw_copy.value
    if device_node is not None:
        if device_target(device_node, ctx) == "cpu":
            return None
        device_text = ctx.text(device_node)  # moved, not copied: still evaluated once
    elif not to_other:
        return None  # a dtype-only conversion, or nothing: not a move
    fixable = device_text is not None and not star and keyword(call, "memory_format") is None \
        and (copy is None or is_false(copy))
    return Move(call, receiver, name, device_text, dtype_text, non_blocking, fixable)


def cast_dtype(call: ast.Call, ctx: RuleContext, alias: str = "torch") -> str | None:
    """The dtype (source text, `torch.` spelled with `alias`) of a pure cast call: `x.half()`,
    `x.to(torch.float16)`, `x.type(torch.float16)`; None for anything else."""
    method = ctx.method_call(call, *CAST_METHODS, "to", "type")
    if method is None or has_star(call) or method[0] is not getattr(call.func, "value", None):
        return None
    name = method[1]
    if name in CAST_METHODS:
        if call.args or call.keywords:
            return None
        return f"{alias}.{CAST_METHODS[name]}"
    if len(call.args) == 1 and not call.keywords and is_dtype(call.args[0], ctx):
        return ctx.text(call.args[0])
    return None


def parent_map(root: ast.AST) -> dict[ast.AST, ast.AST]:
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(root):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    return parents


def root_name(node: ast.expr) -> str | None:
    """`x` for `x`, `x.a`, `x[0]`, `x["k"].a`."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def literal_bool(call: ast.Call, name: str, position: int | None) -> bool | None:
    """The value of a bool argument given as a literal (keyword or at `position`); None when
    it is absent; raises LookupError when it is given but not a literal."""
    kw = keyword(call, name)
    node = kw.value if kw is not None else None
    if node is None and position is not None and len(call.args) > position:
        node = call.args[position]
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int)):
        return bool(node.value)
    raise LookupError(name)


def in_place_target(node: ast.AST) -> ast.expr | None:
    """The expression an in-place statement or call writes to, if any: `x.add_(1)`,
    `x += 1`, `x[0] = 1`, `x.data = y`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        attr = node.func.attr
        if attr.endswith("_") and not attr.startswith("_"):
            return node.func.value
    if isinstance(node, ast.AugAssign):
        return node.target
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, (ast.Subscript, ast.Attribute)):
                return target
    return None


def written_after(names: set[str], after: ast.AST, scope: ast.AST) -> bool:
    """Is a tensor bound to one of `names` written in place (or passed as `out=`) anywhere
    in `scope` after `after` ends? Conservative: names, not values."""
    end = (getattr(after, "end_lineno", None) or after.lineno, getattr(after, "end_col_offset", None) or 0)  # type: ignore[attr-defined]
    for node in ast.walk(scope):
        start = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        if start < end:
            continue
        target = in_place_target(node)
        if target is not None and root_name(target) in names:
            return True
        if isinstance(node, ast.Call):
            out = keyword(node, "out")
            if out is not None and root_name(out.value) in names:
                return True
    return False

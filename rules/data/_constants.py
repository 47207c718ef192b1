"""What the constant-tensor rules share: is a factory call built from constants only, is
the result trivial, or is it a scratch buffer the step writes into?"""

from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.torch_api import keyword as keyword_value  # the argument, not the `keyword` node

from ._moves import cast_dtype, device_target, is_dtype, keyword, written_after

# Factories whose result is fully determined by their arguments. `empty` (a scratch
# buffer) and the random ones make a new value every call and are not constants.
DATA_FACTORIES = frozenset(
    """tensor as_tensor Tensor FloatTensor LongTensor IntTensor BoolTensor DoubleTensor
    HalfTensor ByteTensor""".split()
)
FILL_FACTORIES = frozenset("arange linspace logspace eye ones zeros full".split())
_LITERAL_KEYWORDS = frozenset({"requires_grad", "start", "end", "step", "steps", "base", "fill_value",
                               "size", "n", "m", "data"})


def _literal(node: ast.expr) -> bool:
    """A number, bool, None or string, or a list / tuple of them (nested)."""
    if isinstance(node, ast.Constant):
        return node.value is None or isinstance(node.value, (bool, int, float, complex, str))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _literal(node.operand)
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(_literal(e) for e in node.elts)
    return False


def constant_call(call: ast.Call, ctx: RuleContext) -> bool:
    """Every argument is a literal; `dtype=` and `device=` may be any dtype / device."""
    if not call.args and not any(k.arg in _LITERAL_KEYWORDS for k in call.keywords):
        return False
    if not all(_literal(a) for a in call.args):
        return False
    for kw in call.keywords:
        if kw.arg is None:
            return False
        if kw.arg == "dtype":
            if not is_dtype(kw.value, ctx):
                return False
        elif kw.arg == "device":
            if device_target(kw.value, ctx) is None:
                return False
        elif not _literal(kw.value):
            return False
    return True


def on_device(call: ast.Call, ctx: RuleContext) -> bool:
    """`device=` names a device that is not (known to be) the CPU."""
    device = keyword(call, "device")
    return device is not None and device_target(device.value, ctx) != "cpu"


def trivial(call: ast.Call, factory: str) -> bool:
    """0-dim (`torch.full((), 0.0)`) or empty (`torch.zeros(0, 4)`, `torch.tensor([])`):
    one tiny fill or none at all, where a Python scalar or an empty result is the fix."""
    if factory in DATA_FACTORIES:
        data = call.args[0] if call.args else None
        return isinstance(data, (ast.List, ast.Tuple)) and not data.elts
    if factory not in ("zeros", "ones", "full"):
        return False
    size: list[ast.expr] = []
    if factory == "full" or (len(call.args) == 1 and isinstance(call.args[0], (ast.Tuple, ast.List))):
        first = call.args[0] if call.args else keyword_value(call, "size")
        if not isinstance(first, (ast.Tuple, ast.List)):
            return False
        size = list(first.elts)
        if not size:
            return True
    else:
        size = list(call.args)
    return any(isinstance(d, ast.Constant) and d.value == 0 for d in size)


def scratch_buffer(node: ast.Call, ctx: RuleContext) -> bool:
    """`acc = torch.zeros(3)` (or `lcls, lbox = torch.zeros(1), torch.zeros(1)`) later
    written in place is a scratch buffer the step fills, not a constant."""
    statement = ctx.statement
    function = ctx.function_node
    if function is None:
        return False
    if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is node:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        return bool(names) and written_after(names, statement, function)
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return False
    target, value = statement.targets[0], statement.value
    if not (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)):
        return False
    for element, name in zip(value.elts, target.elts):
        if element is node:
            return isinstance(name, ast.Name) and written_after({name.id}, statement, function)
    return False


def torch_factory(node: ast.Call, ctx: RuleContext, factories: frozenset[str]) -> str | None:
    """`torch.<factory>(...)` for one of `factories`, else None."""
    name = ctx.call_name(node)
    if not name or not name.startswith("torch.") or name.count(".") != 1 or name[6:] not in factories:
        return None
    return name[6:]


def host_constant(node: ast.Call, ctx: RuleContext) -> bool:
    """`torch.tensor([0.1, 0.2])`, `torch.Tensor([[0.1, 0.1, 0.2, 0.2]])`: a constant built on
    the host from literal rows, which constant-tensor-in-hot-path (PFL106) reports as rebuilt
    every step, and as copied every step when it is moved to the device (`.cuda()`)."""
    factory = torch_factory(node, ctx, DATA_FACTORIES)
    if factory is None or on_device(node, ctx) or not constant_call(node, ctx) or trivial(node, factory) \
            or scratch_buffer(node, ctx):
        return False
    data = node.args[0] if node.args else keyword_value(node, "data")
    return isinstance(data, (ast.List, ast.Tuple))


def moved_to_device(node: ast.Call, ctx: RuleContext) -> bool:
    """`torch.tensor([...]).cuda()`, `.float().to(x.device)`: the call's result (through dtype
    casts) is moved to a device that may be an accelerator. Shape only: the walk reaches
    `node` before the move's arguments, so their values are not known yet."""
    parent = ctx.parent(node)
    while isinstance(parent, ast.Attribute) and parent.value is node:
        call = ctx.parent(parent)
        if not isinstance(call, ast.Call) or call.func is not parent:
            return False
        if parent.attr == "cuda":
            return True
        if cast_dtype(call, ctx) is None:
            if parent.attr != "to":
                return False
            target = call.args[0] if call.args else keyword_value(call, "device")
            return target is not None and not is_dtype(target, ctx) and device_target(target, ctx) != "cpu"
        node, parent = call, ctx.parent(call)
    return False

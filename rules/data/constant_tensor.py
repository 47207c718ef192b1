from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid

from ._moves import device_target, is_dtype, keyword, written_after

# Factories whose result is fully determined by their arguments. `empty` (a scratch
# buffer) and the random ones make a new value every call and are not constants.
_DATA_FACTORIES = frozenset(
    """tensor as_tensor Tensor FloatTensor LongTensor IntTensor BoolTensor DoubleTensor
    HalfTensor ByteTensor""".split()
)
_FILL_FACTORIES = frozenset("arange linspace logspace eye ones zeros full".split())
_FACTORIES = _DATA_FACTORIES | _FILL_FACTORIES
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


def _constant_call(call: ast.Call, ctx: RuleContext) -> bool:
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


class ConstantTensorInHotPath(Rule):
    """## What it does
    Checks for tensors built from constants in code that runs every step:
    `torch.tensor([0.485, 0.456, 0.406])`, `torch.arange(10)`, `torch.ones(3, 3)`,
    `torch.eye(4)`, `torch.full((2,), 0.5)` and similar, where every argument is a literal
    (a `device=` and a `dtype=` may be any expression).

    ## Why is this bad?
    The same tensor is rebuilt on every step. `torch.tensor([...])` parses the Python list on
    the host and, with `device=` set to a GPU, copies it there with a blocking transfer
    (the CPU waits for the GPU each time). The other factories launch an allocation and a
    kernel each time. Built once, the tensor costs nothing per step.

    ## Example
    ```python
    import torch

    class Normalize(torch.nn.Module):
        def forward(self, x):
            mean = torch.tensor([0.485, 0.456, 0.406], device=x.device)
            return x - mean.view(1, 3, 1, 1)
    ```

    ## Use instead
    ```python
    import torch

    class Normalize(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))

        def forward(self, x):
            return x - self.mean
    ```
    A buffer moves with the module (`model.to(device)`), is saved in its `state_dict` (pass
    `persistent=False` to keep it out), and is built once.

    ## Fix safety
    There is no automatic fix: hoisting the tensor means choosing where it lives (a buffer,
    a module attribute, a global) and on which device, and a tensor that the code later
    modifies in place must not be shared between steps.

    ## References
    - [`Module.register_buffer`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.register_buffer)
    - [Performance tuning guide: create tensors directly on the target device](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#create-tensors-directly-on-the-target-device)
    """

    code = "PFL106"
    name = "constant-tensor-in-hot-path"
    message = "`{call}()` builds the same constant tensor every step; build it once (a buffer or a module attribute)"
    family = "data"
    triggers = (b"torch",)
    invalid = [
        Invalid(
            """
            import torch

            class Head(torch.nn.Module):
                def forward(self, x):
                    scale = torch.tensor([1.0, 2.0, 4.0], device=x.device, dtype=x.dtype)
                    idx = torch.arange(8)
                    eye = torch.eye(3, device=x.device)
                    return x * scale, idx, eye
            """,
            count=3,
        ),
        Invalid(
            """
            import torch as T

            for images, labels in loader:
                weights = T.full((10,), 0.1, device="cuda")
                offsets = T.LongTensor([0, 1, -1])
                loss = criterion(model(images), labels)
            """,
            count=2,
        ),
        Invalid(
            """
            import torch

            def normalize_batch(batch):
                mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
                std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
                return (batch / 255.0 - mean) / std

            for x, _ in loader:
                loss = model(normalize_batch(x.to(device))).mean()
            """,
            count=2,
            note="`new_tensor` copies the list to the receiver's device",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            class Head(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("scale", torch.tensor([1.0, 2.0, 4.0]))

                def forward(self, x):
                    n = x.shape[0]
                    idx = torch.arange(n, device=x.device)
                    buf = torch.empty(3, device=x.device)
                    noise = torch.randn(3)
                    return x * self.scale, idx, buf, noise
            """,
            note="built in __init__; shapes from data; scratch buffers and random draws",
        ),
        Valid(
            """
            import torch

            scale = torch.tensor([1.0, 2.0])
            for x, y in loader:
                out = model(x) * scale
            """,
            note="already built once",
        ),
        Valid(
            """
            import torch

            class Head(torch.nn.Module):
                def forward(self, x, mask):
                    zero = torch.full((), 0.0, device=x.device)
                    none = torch.zeros(0, 4, device=x.device)
                    empty = torch.tensor([], device=x.device)
                    flag = x == torch.tensor(False)
                    acc = torch.zeros(3, device=x.device)
                    acc += x.sum()
                    return torch.where(mask, zero, x), none, empty, flag, acc
            """,
            note="0-dim and empty tensors, CPU scalars, and a buffer written in place",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(64, 3, 224, 224, device=device)
            mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1)
        """,
        bad="""
            result = x - torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1)
        """,
        good="""
            result = x - mean
        """,
        description="a per-step `torch.tensor([...], device=...)` vs one built once",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name is None:
            self._new_tensor(node, ctx)
            return
        if not name.startswith("torch.") or name.count(".") != 1 or name[6:] not in _FACTORIES:
            return
        if not _constant_call(node, ctx):
            return
        factory = name[6:]
        device = keyword(node, "device")
        on_device = device is not None and device_target(device.value, ctx) != "cpu"
        if factory in _DATA_FACTORIES:
            data = node.args[0] if node.args else (keyword(node, "data").value if keyword(node, "data") else None)
            if not on_device and not isinstance(data, (ast.List, ast.Tuple)):
                return  # a CPU scalar (`torch.tensor(0.5)`): kernels take it by value
        if _trivial(node, factory):
            return
        if self._is_buffer(node, ctx) or self._is_unpacked_buffer(node, ctx):
            return
        if factory in _DATA_FACTORIES and on_device:
            ctx.report(node, self.copy_message, call=ctx.text(node.func))
        else:
            ctx.report(node, call=ctx.text(node.func))

    copy_message = ("`{call}()` copies the same constant to the device every step, a blocking "
                    "host-to-device copy; build it once (a buffer or a module attribute)")

    def _new_tensor(self, node: ast.Call, ctx: RuleContext) -> None:
        """`x.new_tensor([0.485, 0.456, 0.406])`: a constant copied to `x`'s device."""
        method = ctx.method_call(node, "new_tensor")
        if method is None or not node.args or not isinstance(node.args[0], (ast.List, ast.Tuple)):
            return
        receiver = method[0]
        if not ctx.maybe_tensor(receiver) or not _constant_call(node, ctx) or _trivial(node, "tensor"):
            return
        if self._is_buffer(node, ctx) or self._is_unpacked_buffer(node, ctx):
            return
        ctx.report(node, self.copy_message, call=ctx.text(node.func))

    @staticmethod
    def _is_buffer(node: ast.Call, ctx: RuleContext) -> bool:
        """`acc = torch.zeros(3)` later written in place is a scratch buffer, not a constant."""
        statement = ctx.statement
        function = ctx.function_node
        if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.value is not node or function is None:
            return False
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        return bool(names) and written_after(names, statement, function)

    @staticmethod
    def _is_unpacked_buffer(node: ast.Call, ctx: RuleContext) -> bool:
        """`lcls, lbox = torch.zeros(1, device=d), torch.zeros(1, device=d)`, each later
        accumulated into: the tuple form of a scratch buffer."""
        statement = ctx.statement
        function = ctx.function_node
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and function is not None):
            return False
        target, value = statement.targets[0], statement.value
        if not (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
                and len(target.elts) == len(value.elts)):
            return False
        for element, name in zip(value.elts, target.elts):
            if element is node:
                return isinstance(name, ast.Name) and written_after({name.id}, statement, function)
        return False


def _trivial(call: ast.Call, factory: str) -> bool:
    """0-dim (`torch.full((), 0.0)`) or empty (`torch.zeros(0, 4)`, `torch.tensor([])`):
    one tiny fill or none at all, where a Python scalar or an empty result is the fix."""
    if factory in _DATA_FACTORIES:
        data = call.args[0] if call.args else None
        return isinstance(data, (ast.List, ast.Tuple)) and not data.elts
    if factory not in ("zeros", "ones", "full"):
        return False
    size: list[ast.expr] = []
    if factory == "full" or (len(call.args) == 1 and isinstance(call.args[0], (ast.Tuple, ast.List))):
        first = call.args[0] if call.args else (keyword(call, "size").value if keyword(call, "size") else None)
        if not isinstance(first, (ast.Tuple, ast.List)):
            return False
        size = list(first.elts)
        if not size:
            return True
    else:
        size = list(call.args)
    return any(isinstance(d, ast.Constant) and d.value == 0 for d in size)

from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.torch_api import LEGACY_CONSTRUCTORS
from perflint.facts.values import Kind, Value
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import argument, opaque_arguments, torch_prefix

_FUNCTIONS = {"torch.tensor": "torch.tensor", "torch.as_tensor": "torch.as_tensor",
              "torch.asarray": "torch.asarray"}
# Legacy constructors read a sequence's elements the same way (`torch.Tensor([l1, l2])`,
# `torch.cuda.FloatTensor([...])`); they get no fix: their dtype is their own, not the elements'.
_LEGACY = frozenset(f"{module}.{name}" for module in ("torch", "torch.cuda") for name in LEGACY_CONSTRUCTORS)


def _device_tensor_value(value: Value) -> bool:
    return value.kind is Kind.TENSOR and not value.on_cpu


class TensorFromTensorList(Rule):
    """## What it does
    Checks for `torch.tensor([t0, t1, ...])`, `torch.as_tensor([...])`, `torch.asarray([...])`
    and `torch.tensor(list_of_tensors)` where the elements are tensors, in code that runs
    every step; also the legacy constructors of a list display (`torch.Tensor([l1, l2])`,
    `torch.FloatTensor([losses])`) and a list of such lists (`torch.tensor([losses])`).

    ## Why is this bad?
    `torch.tensor` builds its result on the host from Python numbers: every element that is a
    tensor is read with `.item()`, one blocking device-to-host copy per element, each waiting
    for all queued GPU work. The result then lives on the CPU (or the default device), so
    using it with GPU tensors copies it back.

    ## Example
    ```python
    for x, y in loader:
        out = model(x)
        losses = torch.tensor([criterion(out, y), out.abs().mean()])
    ```

    ## Use instead
    ```python
    for x, y in loader:
        out = model(x)
        losses = torch.stack([criterion(out, y), out.abs().mean()]).detach()
    ```

    ## Fix safety
    The fix replaces `torch.tensor(seq)` with `torch.stack(seq).detach()` (plus `.flatten()`
    unless every element is known to be 0-dim), when the only argument is a flat list or
    tuple of tensors, a comprehension, or a variable holding tensors. `.detach()` narrows the
    difference: like `torch.tensor`, the result does not require grad and keeps no graph.
    Values, dtype (including promotion of mixed dtypes such as `int32` + `int64` or
    `bool` + `int64`) and shape then match. It is unsafe because:

    - the result stays on the elements' device (a CUDA tensor), while `torch.tensor` returns
      a tensor on the default device, normally the CPU: `.numpy()`, mixing it with CPU
      tensors, or code that expects a CPU tensor behaves differently;
    - elements on different devices make `torch.stack` raise;
    - an empty sequence makes `torch.stack` raise (`torch.tensor([])` is an empty tensor);
    - elements with more than one value make `torch.tensor` raise but are stacked.

    The legacy constructors and nested lists get no fix: `torch.Tensor` makes the default
    dtype whatever the elements are, and a list of lists needs its own stacking.

    ## References
    - `internal_new_from_data` (torch/csrc/utils/tensor_new.cpp) converts each element with
      `item()`; the profiler shows one `aten::item` per element.
    """

    code = "PFL215"
    name = "tensor-from-tensor-list"
    message = "`{call}` of tensors reads each element to the host and waits for the GPU every step"
    triggers = (b"tensor", b"asarray")
    fix_availability = FixAvailability.SOMETIMES
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                stats = torch.tensor([loss, out.mean()])
            """,
            fixed="""
            import torch

            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                stats = torch.stack([loss, out.mean()]).detach()
            """,
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import torch as T
            from torch import as_tensor

            class Net(T.nn.Module):
                def forward(self, x, parts):
                    norms = [p.norm() for p in parts]
                    a = T.tensor(norms)
                    b = as_tensor([x.max(), x.min()])
                    c = T.tensor([[x.sum(), 1.0], [2.0, x.mean()]])
                    d = T.tensor([x[0], x[1]], dtype=T.float16)
                    return a, b, c, d
            """,
            count=4,
            fixed="""
            import torch as T
            from torch import as_tensor

            class Net(T.nn.Module):
                def forward(self, x, parts):
                    norms = [p.norm() for p in parts]
                    a = T.stack(norms).detach()
                    b = T.stack([x.max(), x.min()]).detach()
                    c = T.tensor([[x.sum(), 1.0], [2.0, x.mean()]])
                    d = T.tensor([x[0], x[1]], dtype=T.float16)
                    return a, b, c, d
            """,
            unsafe_fixes=True,
            note="no fix for nested lists, Python numbers, or keywords",
        ),
        Invalid(
            """
            import torch

            def forward_step(batch):
                out = model(batch)
                rows = [out[0], out[1]]
                return torch.tensor(rows)

            for batch in loader:
                forward_step(batch)
            """,
            fixed="""
            import torch

            def forward_step(batch):
                out = model(batch)
                rows = [out[0], out[1]]
                return torch.stack(rows).detach().flatten()
            
            for batch in loader:
                forward_step(batch)
            """,
            unsafe_fixes=True,
            note="elements not known to be 0-dim: flatten, as torch.tensor reads one value each",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x.cuda())
                l1, l2 = out.mean(), out.std()
                losses = [l1, l2]
                a = torch.Tensor([l1, l2])
                b = torch.tensor([losses])
            """,
            count=2,
            note="a legacy constructor (no fix: its dtype is the default one); a list of a list of tensors",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                sizes = torch.tensor([x.shape[0], y.shape[0]])
                t = torch.tensor([1.0, 2.0, 3.0])
            """,
            note="Python numbers",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                a = torch.zeros(())
                b = torch.ones(())
                c = torch.tensor([a, b])
            """,
            note="CPU tensors",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self, w):
                    super().__init__()
                    self.scale = torch.tensor([w.max(), w.min()])
            """,
            note="once, at construction",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                out = model(x.cuda())
                buf = torch.Tensor(2, 3)
                same = torch.Tensor(out)
            """,
            note="a legacy constructor given a size, or one tensor",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            result = torch.tensor([y.mean(), y.std(), y.max()])
        """,
        good="""
            y = torch.tanh(x)
            result = torch.stack([y.mean(), y.std(), y.max()]).detach()
        """,
        description="`torch.tensor([t0, t1, t2])` vs `torch.stack([...]).detach()`",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name not in _FUNCTIONS and name not in _LEGACY:
            return
        if name in _LEGACY and not (len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple))):
            return  # `torch.Tensor(2, 3)`: a size; `torch.Tensor(t_index)`: a tensor as often as a list
        data = argument(node, 0, "data")
        if data is None and name != "torch.tensor":
            data = argument(node, 0, "obj")
        if data is None:
            return
        if isinstance(data, (ast.List, ast.Tuple)):
            if not _literal_has_device_tensor(data, ctx):
                return
        else:
            value = ctx.value(data)
            if value.kind is not Kind.SEQ or value.elem is None or not _device_tensor_value(value.elem):
                return
        ctx.report(node, fix=self._fix(node, data, ctx) if name in _FUNCTIONS else None, call=f"{name}()")

    def _fix(self, node: ast.Call, data: ast.expr, ctx: RuleContext):
        if opaque_arguments(node) or node.keywords or len(node.args) != 1:
            return None
        if isinstance(data, (ast.List, ast.Tuple)):
            values = [ctx.value(e) for e in data.elts]
            if not values or any(isinstance(e, ast.Starred) for e in data.elts):
                return None
            if not all(v.kind is Kind.TENSOR for v in values):
                return None
            zero_dim = all(v.zero_dim for v in values)
        else:
            elem = ctx.value(data).elem
            assert elem is not None
            zero_dim = elem.zero_dim
        func = node.func
        imports: list[str] = []
        if isinstance(func, ast.Attribute):
            prefix = ctx.text(func.value)
        else:
            prefix, imports = torch_prefix(ctx)
        text = f"{prefix}.stack({ctx.text(data)}).detach()" + ("" if zero_dim else ".flatten()")
        return ctx.fix(
            Applicability.UNSAFE,
            "Stack the tensors on their device with `torch.stack(...).detach()`",
            [ctx.replace(node, text)],
            imports=imports,
        )


def _literal_has_device_tensor(node: ast.List | ast.Tuple, ctx: RuleContext) -> bool:
    for elt in node.elts:
        if isinstance(elt, (ast.List, ast.Tuple)):
            if _literal_has_device_tensor(elt, ctx):
                return True
        else:
            value = ctx.value(elt)
            if _device_tensor_value(value) or (value.kind is Kind.SEQ and value.elem is not None
                                               and value.elem.kind is Kind.TENSOR and value.elem.on_accel):
                # `torch.tensor([losses])` of a list of tensors known to be on the device (not
                # `torch.tensor([add_time_ids])` of sizes read from a batch: Python numbers)
                return True
    return False

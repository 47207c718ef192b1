from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.values import Kind
from perflint.rewrite import RewriteError, cst
from perflint.rule import Benchmark, FixPlan, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._moves import device_target, has_star, keyword

# `torch.tensor` keywords `as_tensor` has too; anything else (requires_grad, pin_memory,
# names) keeps the copy.
_SHARED_KEYWORDS = frozenset({"dtype", "device"})


class TensorFromNumpyCopy(Rule):
    """## What it does
    Checks for `torch.tensor(array)` on a NumPy array in code that runs every step, and in
    the data pipeline's per-sample and per-batch code (`Dataset.__getitem__`, a collate
    function, a transform's `__call__`): host work that runs for every sample, in the
    DataLoader's workers or in the main process.

    `torch.Tensor(array)` is not reported: the legacy constructor already shares the array's
    memory when its dtype is the default dtype, and must convert (copy) otherwise. Neither
    is `torch.tensor(array, device=..., dtype=...)`: with a device or dtype given, PyTorch
    converts the array straight to its destination, the one copy that is needed anyway.

    ## Why is this bad?
    `torch.tensor` always copies its input. For a NumPy array that is a full copy in host
    memory before the data goes anywhere else, on every step. `torch.as_tensor(array)` and
    `torch.from_numpy(array)` wrap the array's memory instead, without copying (when the
    dtype and device already match), and moving that tensor to the GPU afterwards copies it
    only once.

    ## Example
    ```python
    import numpy as np
    import torch

    for batch in loader:
        frame = np.stack(batch["frames"])
        x = torch.tensor(frame).to(device)
    ```

    ## Use instead
    ```python
    import numpy as np
    import torch

    for batch in loader:
        frame = np.stack(batch["frames"])
        x = torch.as_tensor(frame).to(device)
    ```

    ## Fix safety
    The fix is **unsafe**. `torch.as_tensor` shares memory with the array (when the dtype
    and device match), so a later in-place change to either the array or the tensor shows
    up in the other, where `torch.tensor` made an independent copy; and a non-contiguous
    array gives a tensor with the array's strides, where `torch.tensor` made it contiguous.
    Values, shape and dtype are kept (a float64 array stays float64), and both reject arrays
    with negative strides. Calls with `requires_grad=` (which only `torch.tensor` accepts) or
    `pin_memory=` are reported without a fix.
    Read-only arrays make `as_tensor` warn once, and writing to the tensor is then undefined.

    ## References
    - [`torch.as_tensor`](https://pytorch.org/docs/stable/generated/torch.as_tensor.html): "If data is a NumPy array (or similar) with the same dtype and device then a tensor is constructed using torch.from_numpy()."
    - [`torch.tensor`](https://pytorch.org/docs/stable/generated/torch.tensor.html): "torch.tensor() always copies data."
    """

    code = "PFL102"
    name = "tensor-from-numpy-copy"
    message = "`{call}(ndarray)` copies the NumPy array {when}; `torch.as_tensor` shares its memory"
    per_sample = True
    family = "data"
    fix_availability = FixAvailability.SOMETIMES
    triggers = (b"tensor(", b"Tensor(")
    invalid = [
        Invalid(
            """
            import numpy as np
            import torch

            for images, labels in loader:
                weights = np.ones(len(labels))
                w = torch.tensor(weights)
                extra = torch.tensor(images.numpy(), device="cpu")
            """,
            count=2,
            fixed="""
            import numpy as np
            import torch

            for images, labels in loader:
                weights = np.ones(len(labels))
                w = torch.as_tensor(weights)
                extra = torch.as_tensor(images.numpy(), device="cpu")
            """,
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import numpy as np
            import torch

            class Env(torch.nn.Module):
                def forward(self, obs):
                    a = np.asarray(obs)
                    return torch.tensor(a, requires_grad=True)
            """,
            fixed="""
            import numpy as np
            import torch

            class Env(torch.nn.Module):
                def forward(self, obs):
                    a = np.asarray(obs)
                    return torch.tensor(a, requires_grad=True)
            """,
            unsafe_fixes=True,
            note="requires_grad: only torch.tensor takes it, no fix",
        ),
        Invalid(
            """
            import numpy as np
            import torch

            class Frames(torch.utils.data.Dataset):
                def __getitem__(self, i):
                    frames = np.stack([self.decode(i, k) for k in range(8)])
                    return torch.tensor(frames), self.labels[i]

            def collate(batch):
                return torch.tensor(np.stack([b[0] for b in batch]))

            loader = torch.utils.data.DataLoader(Frames(), collate_fn=collate)
            """,
            count=2,
            fixed="""
            import numpy as np
            import torch

            class Frames(torch.utils.data.Dataset):
                def __getitem__(self, i):
                    frames = np.stack([self.decode(i, k) for k in range(8)])
                    return torch.as_tensor(frames), self.labels[i]

            def collate(batch):
                return torch.as_tensor(np.stack([b[0] for b in batch]))

            loader = torch.utils.data.DataLoader(Frames(), collate_fn=collate)
            """,
            unsafe_fixes=True,
            note="the data pipeline: a dataset's __getitem__ and a collate function run for every sample",
        ),
    ]
    valid = [
        Valid(
            """
            import numpy as np
            import torch

            for x, y in loader:
                a = torch.tensor([1.0, 2.0])
                b = torch.tensor(y.tolist())
                c = torch.as_tensor(np.zeros(3))
                d = torch.Tensor(np.zeros(3, dtype=np.float32))
                e = torch.tensor(np.zeros(3), device=device)
                f = torch.tensor(np.zeros(3), dtype=torch.float32)
            """,
            note="lists, as_tensor, the legacy constructor (which already shares memory), and "
                 "conversions to another device or dtype (one copy either way)",
        ),
        Valid(
            """
            import numpy as np
            import torch

            table = torch.tensor(np.arange(10))
            """,
            note="once, at import",
        ),
        Valid(
            """
            import numpy as np
            import torch

            class Frames(torch.utils.data.Dataset):
                def __init__(self, table):
                    self.table = torch.tensor(np.asarray(table))

                def statistics(self):
                    return torch.tensor(np.stack(self.rows))
            """,
            note="a dataset's set-up and helper methods run once, not for every sample",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            import numpy as np
            array = np.random.default_rng(0).random((2048, 2048), dtype=np.float32)
        """,
        bad="""
            result = torch.tensor(array).to(device)
        """,
        good="""
            result = torch.as_tensor(array).to(device)
        """,
        description="`torch.tensor(ndarray)` (a host copy, then the transfer) vs `torch.as_tensor(ndarray)`",
        claim="time",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name != "torch.tensor" or len(node.args) != 1:
            return
        if ctx.value(node.args[0]).kind is not Kind.NDARRAY or keyword(node, "dtype") is not None:
            return
        device = keyword(node, "device")
        if device is not None and device_target(device.value, ctx) != "cpu":
            return
        when = "for every sample (data pipeline)" if ctx.per_sample else "every step"
        ctx.report(node, call=ctx.text(node.func), when=when, fix=self._fix(node, ctx))

    @staticmethod
    def _fix(node: ast.Call, ctx: RuleContext) -> FixPlan | None:
        if has_star(node) or any(k.arg not in _SHARED_KEYWORDS for k in node.keywords):
            return None
        func = node.func
        alias = ctx.torch_alias()
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            prefix = func.value.id  # keep the user's alias
        elif alias is not None:
            prefix = alias
        else:
            return None

        def transform(expr: cst.BaseExpression) -> cst.BaseExpression:
            assert isinstance(expr, cst.Call)
            return expr.with_changes(func=cst.parse_expression(f"{prefix}.as_tensor"))

        try:
            edit = ctx.rewrite(node, transform)
        except (RewriteError, cst.ParserSyntaxError):
            return None
        return ctx.fix(Applicability.UNSAFE, "Use `torch.as_tensor`, which shares the array's memory", [edit])

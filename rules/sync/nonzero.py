from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid

_FUNCTIONS = {"torch.nonzero": "torch.nonzero", "torch.argwhere": "torch.argwhere"}


class Nonzero(Rule):
    """## What it does
    Checks for `torch.nonzero`, `Tensor.nonzero`, `torch.argwhere` and one-argument
    `torch.where(cond)` in code that runs every step.

    ## Why is this bad?
    The size of the result depends on how many elements are non-zero, which only the GPU
    knows. PyTorch counts them on the device and copies the count to the host to allocate the
    output: a blocking copy that waits for all queued work. The PyTorch docs say so for
    `nonzero` and `argwhere`; `torch.where(cond)` is `nonzero(cond, as_tuple=True)`.

    ## Example
    ```python
    for x, y in loader:
        out = model(x)
        idx = torch.nonzero(y == IGNORE, as_tuple=True)
        out[idx] = 0
    ```

    ## Use instead
    Keep the shape static: select with `torch.where(cond, a, b)`, count with
    `torch.count_nonzero`, or use `torch.nonzero_static` when an upper bound is known:
    ```python
    for x, y in loader:
        out = model(x)
        out = torch.where((y == IGNORE).unsqueeze(-1), 0.0, out)
    ```

    ## Fix safety
    No automatic fix yet: whether a static-shape form is equivalent depends on how the
    indices are used.

    ## References
    - [`torch.nonzero`](https://pytorch.org/docs/stable/generated/torch.nonzero.html): "When input is on CUDA, torch.nonzero() causes host-device synchronization."
    - [`torch.where`](https://pytorch.org/docs/stable/generated/torch.where.html): `torch.where(condition)` is identical to `torch.nonzero(condition, as_tuple=True)`.
    """

    code = "PFL211"
    name = "nonzero"
    message = "`{call}` sizes its output from data on the GPU and waits for it every step"
    triggers = (b"nonzero", b"where(", b"argwhere")
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                idx = torch.nonzero(y > 0)
            """
        ),
        Invalid(
            """
            import torch as T
            from torch import argwhere as aw

            class Head(T.nn.Module):
                def forward(self, scores):
                    keep = scores.nonzero()
                    pos = aw(scores > 0.5)
                    rows, cols = T.where(scores > 0.5)
                    return keep, pos, rows
            """,
            count=3,
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                z = torch.where(y > 0, x, 0.0)
            """,
            note="three-argument where does not sync",
        ),
        Valid(
            """
            import numpy as np

            for x, y in loader:
                idx = np.nonzero(np.zeros(3))
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self, mask):
                    super().__init__()
                    self.idx = torch.nonzero(mask)
            """,
            note="once, at construction",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            w = torch.randn(1024, 1024, device=device)
            x = torch.randn(1024, 1024, device=device)
        """,
        bad="""
            y = x
            for _ in range(4):
                y = torch.tanh(y @ w)
            n = torch.nonzero(y > 0).shape[0]
            result = torch.tensor(n)
        """,
        good="""
            y = x
            for _ in range(4):
                y = torch.tanh(y @ w)
            n = torch.count_nonzero(y > 0)
            result = n.cpu() if False else n
        """,
        description="count with `nonzero().shape[0]` vs `count_nonzero`",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name in _FUNCTIONS:
            ctx.report(node, call=f"{name}()")
            return
        if name == "torch.where":
            if len(node.args) == 1 and not node.keywords:
                ctx.report(node, call="torch.where(cond)")
            return
        if name == "torch.Tensor.nonzero" or name == "torch.Tensor.argwhere":
            ctx.report(node, call=f"Tensor.{name.rsplit('.', 1)[1]}()")
            return
        method = ctx.method_call(node, "nonzero", "argwhere")
        if method is not None and ctx.maybe_tensor(method[0]):
            ctx.report(node, call=f".{method[1]}()")

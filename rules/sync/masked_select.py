from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid

from ._support import device_input


class MaskedSelect(Rule):
    """## What it does
    Checks for `torch.masked_select(x, mask)` and `x.masked_select(mask)` in code that runs
    every step.

    ## Why is this bad?
    The result has one element per `True` in the mask, a number only the GPU knows. The CUDA
    implementation indexes with the mask (`index_out`), which turns it into
    `mask.nonzero()`: the count is copied to the host, and the CPU waits for every queued
    kernel.

    ## Example
    ```python
    for x, y in loader:
        out = model(x)
        picked = torch.masked_select(out, y > 0)
        loss = picked.sum()
    ```

    ## Use instead
    Keep the shape static: zero out the unselected elements instead of dropping them.
    ```python
    for x, y in loader:
        out = model(x)
        loss = torch.where(y > 0, out, 0).sum()
    ```

    ## Fix safety
    There is no automatic fix: the result has a data-dependent shape, and what replaces it
    depends on how it is used.

    ## References
    - `masked_select_out_cuda` (aten/src/ATen/native/cuda/IndexKernel.cpp) calls `index_out`
      with the mask; `expandTensors` (ATen/native/IndexingUtils.h) calls `nonzero()`.
    """

    code = "PFL213"
    name = "masked-select"
    message = "`{call}` sizes its output from a mask on the GPU and waits for it every step"
    triggers = (b"masked_select",)
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                a = torch.masked_select(out, y > 0)
                b = out.masked_select(y > 0)
            """,
            count=2,
        ),
        Invalid(
            """
            import torch as T
            from torch import masked_select as ms

            class Head(T.nn.Module):
                def forward(self, x, m):
                    return ms(x, m), T.Tensor.masked_select(x, m)
            """,
            count=2,
            note="aliases and the unbound method",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                z = torch.where(y > 0, out, 0)
            """,
            note="static-shape selection",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self, table, keep):
                    super().__init__()
                    self.rows = torch.masked_select(table, keep)
            """,
            note="once, at construction",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                t = torch.arange(10)
                small = t.masked_select(t > 3)
            """,
            note="a CPU tensor",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            result = torch.masked_select(y, y > 0).sum()
        """,
        good="""
            y = torch.tanh(x)
            result = torch.where(y > 0, y, 0).sum()
        """,
        description="sum over `masked_select` vs `torch.where`",
        compare="close",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name == "torch.masked_select":
            source = node.args[0] if node.args else next(
                (kw.value for kw in node.keywords if kw.arg == "input"), None)
            if source is None or device_input(ctx, source):
                ctx.report(node, call="torch.masked_select()")
            return
        method = ctx.method_call(node, "masked_select")
        if method is not None and device_input(ctx, method[0]):
            ctx.report(node, call="Tensor.masked_select()")

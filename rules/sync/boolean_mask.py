from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid


def mask_in_index(index: ast.expr, ctx: RuleContext) -> ast.expr | None:
    """The boolean-tensor part of a subscript (`x[m]`, `x[:, m]`, `x[m, 0]`), if any."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    for part in parts:
        if not isinstance(part, ast.Slice) and ctx.is_bool_tensor(part):
            return part
    return None


class BooleanMaskIndexing(Rule):
    """## What it does
    Checks for indexing a tensor with a boolean mask in code that runs every step: reads
    (`x[mask]`, `x[:, mask]`), in-place updates (`x[mask] += v`) and writes of a tensor value
    (`x[mask] = y[mask]`, `x[mask] = t`).

    Writing a Python number (`x[mask] = 0.0`) is not reported: PyTorch turns it into
    `masked_fill_`, which does not sync.

    ## Why is this bad?
    A boolean index is converted to integer indices with `mask.nonzero()`: the result size
    depends on the data, so the count is copied to the host and the CPU waits for the GPU.

    ## Example
    ```python
    for x, y in loader:
        logits = model(x)
        valid = y != IGNORE
        loss = criterion(logits[valid], y[valid])
    ```

    ## Use instead
    ```python
    for x, y in loader:
        logits = model(x)
        loss = F.cross_entropy(logits, y, ignore_index=IGNORE)
    ```
    Or keep shapes static with `torch.where(mask, x, 0)`, `masked_fill`, or multiply by the
    mask when summing.

    ## Fix safety
    No automatic fix for reads: the shape of the result changes.

    ## References
    - `expandTensors` in ATen/native/IndexingUtils.h turns boolean indices into `nonzero()`.
    """

    code = "PFL214"
    name = "boolean-mask-indexing"
    message = "indexing with a boolean mask calls `nonzero()` and waits for the GPU every step"
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                keep = y >= 0
                loss = criterion(out[keep], y[keep])
            """,
            count=2,
        ),
        Invalid(
            """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x, y):
                    x[y > 0] = y[y > 0]
                    x[torch.isnan(x)] += 1
                    return x[:, x.sum(0) > 0]
            """,
            count=4,
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                out[y < 0] = 0.0
                out[torch.isnan(out)] = -1
            """,
            note="writing a Python scalar uses masked_fill_, no sync",
        ),
        Valid(
            """
            import numpy as np

            for x, y in loader:
                a = np.arange(10)
                b = a[a > 3]
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                idx = torch.argsort(y)
                z = x[idx]
            """,
            note="integer index tensors gather without a sync",
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
            result = y[y > 0].sum()
        """,
        good="""
            y = x
            for _ in range(4):
                y = torch.tanh(y @ w)
            result = torch.where(y > 0, y, 0).sum()
        """,
        description="sum over `x[mask]` vs `torch.where(mask, x, 0)`",
        compare="close",
    )

    def visit_Subscript(self, node: ast.Subscript, ctx: RuleContext) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        if mask_in_index(node.slice, ctx) is not None and ctx.maybe_tensor(node.value):
            ctx.report(node)

    def visit_Assign(self, node: ast.Assign, ctx: RuleContext) -> None:
        for target in node.targets:
            if not isinstance(target, ast.Subscript):
                continue
            if mask_in_index(target.slice, ctx) is None or not ctx.maybe_tensor(target.value):
                continue
            if ctx.is_tensor(node.value):
                ctx.report(target, "writing a tensor through a boolean mask calls `nonzero()` and waits for the GPU every step")

    def visit_AugAssign(self, node: ast.AugAssign, ctx: RuleContext) -> None:
        target = node.target
        if isinstance(target, ast.Subscript) and mask_in_index(target.slice, ctx) is not None \
                and ctx.maybe_tensor(target.value):
            ctx.report(target, "updating through a boolean mask calls `nonzero()` and waits for the GPU every step")

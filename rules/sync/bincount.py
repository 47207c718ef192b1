from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import (
    NOT_LITERAL,
    argument,
    argument_text,
    device_input,
    is_simple,
    literal,
    only_parameters,
    receiver_text,
    torch_prefix,
)


class Bincount(Rule):
    """## What it does
    Checks for `torch.bincount(x)` and `x.bincount()` in code that runs every step, with or
    without `weights` and `minlength`.

    ## Why is this bad?
    The length of the result is `max(x.max() + 1, minlength)`, so PyTorch reads the minimum
    and the maximum of `x` to the host (`_bincount_cuda_template`) to check the input and
    size the output, even when `minlength` is given. The CPU waits for every queued kernel.

    ## Example
    ```python
    for images, labels in loader:
        logits = model(images)
        counts = torch.bincount(labels, minlength=NUM_CLASSES)
        loss = criterion(logits, labels) * (counts > 0).sum()
    ```

    ## Use instead
    When the number of bins is known on the host, count with `scatter_add_`:
    ```python
    for images, labels in loader:
        logits = model(images)
        counts = torch.zeros(NUM_CLASSES, dtype=torch.long, device=labels.device)
        counts.scatter_add_(0, labels, torch.ones_like(labels))
        loss = criterion(logits, labels) * (counts > 0).sum()
    ```

    ## Fix safety
    With `minlength=K` and no `weights`, the fix counts into a fixed-size tensor:
    `torch.zeros(K, dtype=torch.long, device=x.device).scatter_add_(0, x.long(),
    torch.ones_like(x, dtype=torch.long))`. For every 1-D input with values in `[0, K)` the
    counts, dtype (`int64`), length and device are the same. It is unsafe because:

    - when a value is `>= K`, `bincount` returns a longer result while the fix fails (an
      index error on the CPU, a device-side assert on CUDA);
    - a negative value raises in both on the CPU, but is a device-side assert on CUDA;
    - `bool` and floating inputs make `bincount` raise, while the fix counts them
      (floats truncated).

    Without `minlength` (the length depends on the data) or with `weights` (`bincount`
    returns `float64` for non-`float32` weights) there is no fix.

    ## References
    - `_bincount_cuda_template` in aten/src/ATen/native/cuda/SummaryOps.cu reads
      `self.min()` and `self.max()` to the host.
    """

    code = "PFL217"
    name = "bincount"
    message = "`{call}` reads the input's minimum and maximum to the host and waits for the GPU every step"
    triggers = (b"bincount",)
    fix_availability = FixAvailability.SOMETIMES
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                a = torch.bincount(y)
                b = y.bincount(weights=x)
                c = torch.bincount(y, minlength=10)
            """,
            count=3,
            fixed="""
            import torch

            for x, y in loader:
                a = torch.bincount(y)
                b = y.bincount(weights=x)
                c = torch.zeros(10, dtype=torch.long, device=y.device).scatter_add_(
                    0, y.long(), torch.ones_like(y, dtype=torch.long)
                )
            """,
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import torch as T
            from torch import bincount as bc

            class Balance(T.nn.Module):
                def forward(self, logits, k: int):
                    counts = logits.argmax(-1).bincount(minlength=k)
                    other = bc(logits.argmax(0), None, k)
                    third = T.Tensor.bincount(logits.argmax(1))
                    return counts, other, third
            """,
            count=3,
            fixed="""
            import torch as T
            from torch import bincount as bc

            class Balance(T.nn.Module):
                def forward(self, logits, k: int):
                    counts = (
                        lambda i: T.zeros(k, dtype=T.long, device=i.device).scatter_add_(
                            0, i, T.ones_like(i)
                        )
                    )(logits.argmax(-1).long())
                    other = (
                        lambda i: T.zeros(k, dtype=T.long, device=i.device).scatter_add_(
                            0, i, T.ones_like(i)
                        )
                    )(logits.argmax(0).long())
                    third = T.Tensor.bincount(logits.argmax(1))
                    return counts, other, third
            """,
            unsafe_fixes=True,
            note="an input that is not a plain name is evaluated once; a fixed line longer than the "
                 "file's line length (88 here) is laid out over several lines",
        ),
    ]
    valid = [
        Valid(
            """
            import numpy as np

            for x, y in loader:
                counts = np.bincount(np.array([0, 1, 1]))
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            class Sampler(torch.nn.Module):
                def __init__(self, labels):
                    super().__init__()
                    self.weights = 1.0 / torch.bincount(labels)
            """,
            note="once, at construction",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
            counts = torch.bincount(y)
            """,
            note="once, after the loop",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
            labels = torch.randint(0, 100, (size * size,), device=device)
        """,
        bad="""
            y = torch.tanh(x)
            shifted = labels + (y[0, 0] > 2).long()
            result = torch.bincount(shifted, minlength=101)
        """,
        good="""
            y = torch.tanh(x)
            shifted = labels + (y[0, 0] > 2).long()
            result = torch.zeros(101, dtype=torch.long, device=shifted.device).scatter_add_(
                0, shifted, torch.ones_like(shifted))
        """,
        description="`bincount(minlength=K)` vs `scatter_add_` into K bins",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name == "torch.bincount":
            source, offset = argument(node, 0, "input"), 1
            if source is not None and not device_input(ctx, source):
                return
            label = "torch.bincount()"
        else:
            method = ctx.method_call(node, "bincount")
            if method is None or not device_input(ctx, method[0]):
                return
            source, offset = method[0], 1 if name == "torch.Tensor.bincount" else 0
            label = "Tensor.bincount()"
        fix = None
        if source is not None:
            fix = _scatter_fix(node, source, offset, ctx)
        ctx.report(node, fix=fix, call=label)


def _scatter_fix(node: ast.Call, source: ast.expr, offset: int, ctx: RuleContext):
    allowed = {"weights": offset, "minlength": offset + 1}
    if offset:
        allowed["input"] = 0
    if not only_parameters(node, allowed):
        return None
    weights, minlength = argument(node, offset, "weights"), argument(node, offset + 1, "minlength")
    if minlength is None or (weights is not None and literal(weights) is not None):
        return None
    bins = literal(minlength)
    if bins is not NOT_LITERAL and not (isinstance(bins, int) and not isinstance(bins, bool) and bins > 0):
        return None
    torch, imports = torch_prefix(ctx)
    k = argument_text(ctx, minlength)
    if is_simple(source) and "\n" not in ctx.text(source):
        x = ctx.text(source)
        text = (f"{torch}.zeros({k}, dtype={torch}.long, device={x}.device)"
                f".scatter_add_(0, {x}.long(), {torch}.ones_like({x}, dtype={torch}.long))")
    else:  # evaluate the input once
        text = (f"(lambda i: {torch}.zeros({k}, dtype={torch}.long, device=i.device)"
                f".scatter_add_(0, i, {torch}.ones_like(i)))({receiver_text(ctx, source)}.long())")
    return ctx.fix(
        Applicability.UNSAFE,
        "Count into `minlength` bins with `scatter_add_` (no host read; values must be below it)",
        [ctx.replace(node, text)],
        imports=imports,
    )

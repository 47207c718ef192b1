from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid

from ._support import NOT_LITERAL, argument, device_input, literal, opaque_arguments


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class HistcWithoutRange(Rule):
    """## What it does
    Checks for `torch.histc(x)`, `torch.histc(x, bins)` and `x.histc(...)` without a range
    (`min < max`) in code that runs every step. The defaults `min=0, max=0` mean "use the
    data's range".

    ## Why is this bad?
    When `min == max`, PyTorch computes the minimum and the maximum of the input and reads
    them to the host to place the bin edges (`_histc_cuda_template`): a blocking copy that
    waits for every queued kernel. With an explicit range there is no host read.

    ## Example
    ```python
    for x, y in loader:
        acts = model(x)
        hist = torch.histc(acts, bins=64)
    ```

    ## Use instead
    ```python
    for x, y in loader:
        acts = model(x)
        hist = torch.histc(acts, bins=64, min=-8.0, max=8.0)
    ```

    ## Fix safety
    There is no automatic fix: the bins are the same only if the range given equals the data's
    range, which only the author can decide (values outside `[min, max]` are ignored).

    ## References
    - `_histc_cuda_template` in aten/src/ATen/native/cuda/SummaryOps.cu reads `self.min()` and
      `self.max()` when `min == max`.
    """

    code = "PFL218"
    name = "histc-without-range"
    message = "`{call}` without a range reads the data's minimum and maximum to the host and waits for the GPU every step"
    triggers = (b"histc",)
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                a = torch.histc(out)
                b = torch.histc(out, 10)
                c = out.histc(bins=32, min=0, max=0)
                d = torch.histc(out, 10, 0.0)
            """,
            count=4,
        ),
        Invalid(
            """
            import torch as T
            from torch import histc as hc

            class Monitor(T.nn.Module):
                def forward(self, x):
                    return hc(x, bins=8), T.Tensor.histc(x, 8, 1.0, 1.0)
            """,
            count=2,
            note="aliases; `min == max` in any form",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                a = torch.histc(out, bins=10, min=-1.0, max=1.0)
                b = out.histc(10, -3, 3)
                c = torch.histc(out, 10, min=lo, max=hi)
                d = torch.histc(out, 10, max=5)
            """,
            note="a range given (literal or not)",
        ),
        Valid(
            """
            import numpy as np

            for x, y in loader:
                counts, edges = np.histogram(np.zeros(4))
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
            hist = torch.histc(loss.detach().flatten())
            """,
            note="once, after the loop",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            lo, hi = y.min(), y.max()
            result = torch.histc((y - lo) / (hi - lo), bins=64)
        """,
        good="""
            y = torch.tanh(x)
            lo, hi = y.min(), y.max()
            result = torch.histc((y - lo) / (hi - lo), bins=64, min=0.0, max=1.0)
        """,
        description="`histc` of data normalised to [0, 1], without vs with the range",
        compare="close",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name == "torch.histc":
            source, offset, label = argument(node, 0, "input"), 1, "torch.histc()"
            if source is not None and not device_input(ctx, source):
                return
        else:
            method = ctx.method_call(node, "histc")
            if method is None or not device_input(ctx, method[0]):
                return
            source = method[0]
            offset = 1 if name == "torch.Tensor.histc" else 0
            label = "Tensor.histc()"
        if opaque_arguments(node):
            return
        low = argument(node, offset + 1, "min")
        high = argument(node, offset + 2, "max")
        low_value = 0 if low is None else literal(low)
        high_value = 0 if high is None else literal(high)
        if low_value is NOT_LITERAL or high_value is NOT_LITERAL:
            return  # a range computed by the caller: assume it is one
        if _number(low_value) and _number(high_value) and low_value == high_value:
            ctx.report(node, call=label)

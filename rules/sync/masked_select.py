from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import argument_text, device_input


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
    A selection that is only reduced keeps the shape static: `torch.masked_select(x, m).sum()`
    (and `x.masked_select(m)`; `.nansum()`, `.count_nonzero()`) becomes
    `torch.where(m, x, 0).sum()`. `where` broadcasts `x` and `m` exactly as `masked_select`
    does, so no shape condition is needed. Counts are exact (safe), and so are sums of
    integer and bool `x` (safe when the dtype is known); floating sums add the same values in
    another order, with zeros in between: close, not bit-exact, so unsafe. `.max()` /
    `.min()` (`amax`/`amin`), only for `x` known to be floating, become
    `torch.where(m, x, float("-inf")).max()` (`inf` for min): exact when something is
    selected; when nothing is, the original raises and the fix returns -inf (inf); an empty
    `x` raises in both. Unsafe. `where` evaluates the mask before `x`: no fix when both are
    calls. Any other use of the selection has no automatic fix: the result has a
    data-dependent shape, and what replaces it depends on how it is used.

    ## References
    - `masked_select_out_cuda` (aten/src/ATen/native/cuda/IndexKernel.cpp) calls `index_out`
      with the mask; `expandTensors` (ATen/native/IndexingUtils.h) calls `nonzero()`.
    """

    code = "PFL213"
    name = "masked-select"
    fix_availability = FixAvailability.SOMETIMES
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
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                a = torch.masked_select(out, y > 0).sum()
                b = y.long().masked_select(y > 0).sum()
            """,
            count=2,
            unsafe_fixes=True,
            fixed="""
            import torch

            for x, y in loader:
                out = model(x)
                a = torch.where(y > 0, out, 0).sum()
                b = torch.where(y > 0, y.long(), 0).sum()
            """,
            note="a selection that is only summed",
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
                mask = node.args[1] if len(node.args) == 2 and not node.keywords else None
                ctx.report(node, call="torch.masked_select()", fix=self._reduction_fix(node, source, mask, ctx))
            return
        method = ctx.method_call(node, "masked_select")
        if method is not None and device_input(ctx, method[0]):
            args = node.args[1:] if ctx.call_name(node) else node.args
            mask = args[0] if len(args) == 1 and not node.keywords else None
            ctx.report(node, call="Tensor.masked_select()", fix=self._reduction_fix(node, method[0], mask, ctx))

    def _reduction_fix(self, node: ast.Call, x: ast.expr | None, mask: ast.expr | None, ctx: RuleContext):
        """`masked_select(x, m).sum()` -> `torch.where(m, x, 0).sum()` (and max/min)."""
        if x is None or mask is None or isinstance(mask, ast.Starred) or isinstance(x, ast.Starred):
            return None
        attribute = ctx.parent(node)
        call = ctx.parent(attribute) if isinstance(attribute, ast.Attribute) else None
        if not (isinstance(attribute, ast.Attribute) and isinstance(call, ast.Call) and call.func is attribute
                and not call.args and not call.keywords and attribute.attr in _REDUCTIONS):
            return None
        if all(any(isinstance(sub, ast.Call) for sub in ast.walk(part)) for part in (x, mask)):
            return None  # `where` evaluates the mask first: only when one of them is plain
        reduction = attribute.attr
        dtype = ctx.value(x).dtype
        alias = ctx.torch_alias()
        t = alias or "torch"
        m, xt = argument_text(ctx, mask), argument_text(ctx, x)
        if reduction in ("sum", "nansum", "count_nonzero"):
            text = f"{t}.where({m}, {xt}, 0).{reduction}()"
            safe = reduction == "count_nonzero" or (dtype in ("int", "bool") and reduction == "sum")
        elif dtype == "float":
            fill = '"-inf"' if reduction in ("max", "amax") else '"inf"'
            text = f"{t}.where({m}, {xt}, float({fill})).{reduction}()"
            safe = False
        else:
            return None
        return ctx.fix(
            Applicability.SAFE if safe else Applicability.UNSAFE,
            "Reduce over `torch.where(mask, x, ...)` instead of selecting (no `nonzero()`)",
            [ctx.replace(call, text)],
            imports=[] if alias else ["torch"],
        )


_REDUCTIONS = ("sum", "nansum", "count_nonzero", "max", "min", "amax", "amin")

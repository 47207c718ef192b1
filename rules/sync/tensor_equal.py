from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.shapes import same_shape
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import argument, device_input, opaque_arguments, operand_text, torch_prefix

_FUNCTIONS = {"torch.equal": "equal", "torch.allclose": "allclose"}


class TensorEqual(Rule):
    """## What it does
    Checks for `torch.equal(a, b)`, `a.equal(b)`, `torch.allclose(a, b)` and `a.allclose(b)`
    in code that runs every step, including `assert torch.allclose(...)` in a training loop.

    ## Why is this bad?
    Both return a Python `bool`: they compare on the device and read the answer to the host
    (`eq(...).all().item()`, `isclose(...).all().item()`). The read waits for every queued
    kernel.

    ## Example
    ```python
    for x, y in loader:
        out = model(x)
        same = torch.allclose(out, y, atol=1e-3)
        stats.append(same)
    ```

    ## Use instead
    Keep the answer on the device and read it rarely:
    ```python
    for x, y in loader:
        out = model(x)
        same = torch.isclose(out, y, atol=1e-3).all()
        stats.append(same)
    ```

    ## Fix safety
    `torch.allclose(a, b, ...)` becomes `torch.isclose(a, b, ...).all()` (the same arguments,
    which `allclose` itself passes to `isclose`; both broadcast). `torch.equal(a, b)` becomes
    `(a == b).all()` only when `a` and `b` are known to have the same shape (one is computed
    elementwise from the other, e.g. `torch.equal(x, x.round())`); otherwise the rewrite is
    display-only, because `torch.equal` returns `False` for different shapes while `==`
    broadcasts or raises, and different shapes are common (a kernel called with train and test
    inputs).

    The fixes are unsafe because the result is a 0-dim bool tensor, not a `bool`
    (`result is True`, JSON encoding). No fix is offered where the answer is read on the host
    again as often as it is made (`if`, `assert`, `not`, `and`/`or`, `bool()`, formatting,
    also one assignment later, as in `same = torch.equal(a, b)` then `if not same:`): there
    the sync would only move. NaN compares unequal and mixed dtypes compare by value in both.

    ## References
    - `cuda_equal` (aten/src/ATen/native/cuda/Equal.cpp) and `allclose`
      (aten/src/ATen/native/TensorCompare.cpp) end in `.item()`.
    """

    code = "PFL220"
    name = "tensor-equal"
    message = "`{call}` reads its answer to the host and waits for the GPU every step"
    triggers = (b"equal", b"allclose")
    fix_availability = FixAvailability.SOMETIMES
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                a = torch.equal(out, y)
                b = out.allclose(y, rtol=1e-3)
                if torch.allclose(out, y):
                    pass
                assert out.equal(y)
                c = torch.equal(out, out.round())
            """,
            count=5,
            fixed="""
            import torch

            for x, y in loader:
                out = model(x)
                a = torch.equal(out, y)
                b = out.isclose(y, rtol=1e-3).all()
                if torch.allclose(out, y):
                    pass
                assert out.equal(y)
                c = (out == out.round()).all()
            """,
            unsafe_fixes=True,
            note="no fix where the result is used as a condition; `equal` is rewritten only for "
                 "shapes known equal (display-only otherwise)",
        ),
        Invalid(
            """
            import torch as T
            from torch import allclose as close

            class Check(T.nn.Module):
                def forward(self, x, y):
                    same = [close(x, y, 1e-4, 1e-6, True), T.Tensor.equal(x, y + 1)]
                    return same, not T.equal(x, y)
            """,
            count=3,
            fixed="""
            import torch as T
            from torch import allclose as close

            class Check(T.nn.Module):
                def forward(self, x, y):
                    same = [T.isclose(x, y, 1e-4, 1e-6, True).all(), T.Tensor.equal(x, y + 1)]
                    return same, not T.equal(x, y)
            """,
            unsafe_fixes=True,
            note="aliases, positional tolerances, the unbound method",
        ),
        Invalid(
            """
            import torch

            class Kernel(torch.nn.Module):
                def forward(self, x1, x2):
                    x1_eq_x2 = torch.equal(x1, x2)
                    if not x1_eq_x2:
                        return x1 - x2
                    return torch.zeros_like(x1)
            """,
            unsafe_fixes=True,
            fixed="""
            import torch

            class Kernel(torch.nn.Module):
                def forward(self, x1, x2):
                    x1_eq_x2 = torch.equal(x1, x2)
                    if not x1_eq_x2:
                        return x1 - x2
                    return torch.zeros_like(x1)
            """,
            note="the answer is a condition one assignment later (gpytorch's kernels): no fix; "
                 "x1 and x2 often differ in shape there, too",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                unchanged = torch.equal(out.clamp(0, 1), out)
                history.append(unchanged)
            """,
            unsafe_fixes=True,
            fixed="""
            import torch

            for x, y in loader:
                out = model(x)
                unchanged = (out.clamp(0, 1) == out).all()
                history.append(unchanged)
            """,
            note="shapes known equal: `clamp` with scalar bounds keeps the shape",
        ),
    ]
    valid = [
        Valid(
            """
            import numpy as np

            for x, y in loader:
                a = np.allclose(np.zeros(3), np.zeros(3))
                b = np.array_equal(np.zeros(3), np.zeros(3))
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
            assert torch.allclose(model(x), y)
            """,
            note="once, after the loop",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                a = torch.zeros(3)
                same = torch.equal(a, torch.ones(3))
            """,
            note="CPU tensors",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            result = torch.tensor(torch.allclose(y, x, atol=1e-3))
        """,
        good="""
            y = torch.tanh(x)
            result = torch.isclose(y, x, atol=1e-3).all()
        """,
        description="`torch.allclose` vs `torch.isclose(...).all()` kept on the device",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name in _FUNCTIONS:
            kind, qualified = _FUNCTIONS[name], False
            left, right = argument(node, 0, "input"), argument(node, 1, "other")
            if not (device_input(ctx, left) or device_input(ctx, right)):
                if left is not None or right is not None:
                    return
        else:
            method = ctx.method_call(node, "equal", "allclose")
            if method is None:
                return
            left, kind = method
            qualified = name is not None
            right = argument(node, 1 if qualified else 0, "other")
            if not device_input(ctx, left):
                return
            if right is not None and not ctx.value(right).maybe_tensor:
                return  # `obj.equal(3)`, `a.equal("x")`: not a tensor comparison
        fix = None
        # Where the answer is read on the host anyway (`if same:`, `not same`, `f"{same}"`,
        # one assignment later too), a tensor would only move the sync.
        if not opaque_arguments(node) and not ctx.reaches_host(node):
            fix = self._fix(node, ctx, kind, name, left, right, qualified)
        ctx.report(node, fix=fix, call=f"{'torch' if name in _FUNCTIONS else 'Tensor'}.{kind}()")

    def _fix(self, node, ctx, kind, name, left, right, qualified):
        if left is None or right is None:
            return None
        if kind == "equal":
            if len(node.args) + len(node.keywords) != (2 if name in _FUNCTIONS or qualified else 1):
                return None
            text = f"({operand_text(ctx, left, True)} == {operand_text(ctx, right, True)}).all()"
            if not same_shape(left, right, ctx.qualname):
                # `torch.equal` is False for different shapes, where `==` broadcasts or raises:
                # common (train and test inputs of a kernel), so only shown.
                return ctx.fix(Applicability.DISPLAY_ONLY,
                               "Compare on the device with `(a == b).all()` (only if the shapes are equal)",
                               [ctx.replace(node, text)])
            message = "Compare on the device with `(a == b).all()`"
        else:
            func = node.func
            if name in _FUNCTIONS:
                prefix, imports = (ctx.text(func.value), []) if isinstance(func, ast.Attribute) else torch_prefix(ctx)
                callee = f"{prefix}.isclose"
            elif qualified:
                prefix, imports = torch_prefix(ctx)
                callee = f"{prefix}.isclose"
            else:
                assert isinstance(func, ast.Attribute)
                callee, imports = ctx.text(func)[: -len("allclose")] + "isclose", []
            start = ctx.offsets(node.func)[1]
            end = ctx.offsets(node)[1]
            text = callee + ctx.source.text[start:end] + ".all()"
            message = "Compare on the device with `torch.isclose(...).all()`"
            return ctx.fix(Applicability.UNSAFE, message, [ctx.replace(node, text)], imports=imports)
        return ctx.fix(Applicability.UNSAFE, message, [ctx.replace(node, text)])

from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.shapes import is_scalar_literal, is_simple_reference, mask_has_shape_of
from perflint.facts.values import Kind
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

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
    - Counts: `len(torch.nonzero(c))`, `torch.nonzero(c).shape[0]` and `c.nonzero().size(0)`
      become `torch.count_nonzero(c)`. The count is the same, but it is a 0-dim tensor instead
      of a Python `int`: code that needs an `int` (`range(n)`, list indexing, `int(n)`) syncs
      there instead, or fails. Unsafe.
    - Writes: `x[torch.where(c)] = v` and `x[torch.nonzero(c, as_tuple=True)] = v` become
      `x.masked_fill_(c, v)` for a Python number `v`, and
      `x.copy_(torch.where(c, v.to(x.dtype), x))` for a 0-dim tensor `v` (in place, like the
      original; `v` is cast to `x`'s dtype, as indexing does). They are exact when `c` is a
      boolean mask with the shape of `x`. The fix is safe when that is provable, because `c`
      is computed elementwise from `x` and Python numbers (`x > 0`, `torch.isnan(x)`,
      `(x < 0) | (x > 1)`), and unsafe otherwise: a mask over the leading dimensions selects
      rows when indexing but is aligned to the trailing dimensions by `masked_fill_`.
      Where the original raises (a 0-dim `x`; a tensor `v` of another dtype, which integer-index
      writes reject), the fixed code runs.

    ## References
    - [`torch.nonzero`](https://pytorch.org/docs/stable/generated/torch.nonzero.html): "When input is on CUDA, torch.nonzero() causes host-device synchronization."
    - [`torch.where`](https://pytorch.org/docs/stable/generated/torch.where.html): `torch.where(condition)` is identical to `torch.nonzero(condition, as_tuple=True)`.
    """

    code = "PFL211"
    name = "nonzero"
    fix_availability = FixAvailability.SOMETIMES
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
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                out[torch.where(out < 0)] = 0.0
                out[torch.nonzero(torch.isnan(out), as_tuple=True)] = y.mean()
            """,
            count=2,
            fixed="""
            import torch

            for x, y in loader:
                out = model(x)
                out.masked_fill_(out < 0, 0.0)
                out.copy_(torch.where(torch.isnan(out), y.mean().to(out.dtype), out))
            """,
            note="writes through a provably same-shaped mask: safe",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                n = len(torch.nonzero(y == 3)) + y.nonzero().shape[0]
            """,
            count=2,
            fixed="""
            import torch

            for x, y in loader:
                n = torch.count_nonzero(y == 3) + torch.count_nonzero(y)
            """,
            unsafe_fixes=True,
            note="counts become 0-dim tensors: unsafe",
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
        Valid(
            """
            import torch

            class Noise(torch.nn.Module):
                def forward(self, x):
                    keep = torch.rand(x.shape[0]) < 0.5
                    return torch.nonzero(keep), torch.argwhere(keep)
            """,
            note="a mask made on the CPU (no `device=`) waits for no GPU",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            n = torch.nonzero(x > 0).shape[0]
            result = n
        """,
        good="""
            n = torch.count_nonzero(x > 0)
            result = n
        """,
        description="count with `nonzero().shape[0]` vs `count_nonzero` (the fix's output)",
    )

    # ----------------------------------------------------------------- detection
    def _sync_call(self, node: ast.AST, ctx: RuleContext) -> tuple[str, ast.expr | None, bool] | None:
        """(description, condition, as_tuple) when `node` is a syncing nonzero-family call."""
        if not isinstance(node, ast.Call):
            return None
        name = ctx.call_name(node)
        as_tuple = _as_tuple(node)
        if node.args and ctx.value(node.args[0]).on_cpu and name is not None:
            return None  # `torch.nonzero(cpu_mask)` waits for nothing
        if name in _FUNCTIONS:
            return f"{name}()", node.args[0] if node.args else None, as_tuple
        if name == "torch.where":
            if len(node.args) == 1 and not node.keywords:
                return "torch.where(cond)", node.args[0], True
            return None
        if name in ("torch.Tensor.nonzero", "torch.Tensor.argwhere"):
            return f"Tensor.{name.rsplit('.', 1)[1]}()", node.args[0] if node.args else None, as_tuple
        method = ctx.method_call(node, "nonzero", "argwhere")
        if method is not None and ctx.maybe_tensor(method[0]):
            return f".{method[1]}()", method[0], as_tuple
        return None

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        found = self._sync_call(node, ctx)
        if found is not None:
            ctx.report(node, call=found[0])
            return
        # len(torch.nonzero(c)) and c.nonzero().size(0): a count of non-zeros
        if ctx.call_name(node) == "builtins.len" and len(node.args) == 1 and not node.keywords:
            self._count(node.args[0], node, ctx)
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "size" and \
                len(node.args) == 1 and _is_zero(node.args[0]) and not node.keywords:
            self._count(node.func.value, node, ctx)

    def visit_Subscript(self, node: ast.Subscript, ctx: RuleContext) -> None:
        # torch.nonzero(c).shape[0]
        value = node.value
        if isinstance(node.ctx, ast.Load) and isinstance(value, ast.Attribute) and \
                value.attr == "shape" and _is_zero(node.slice):
            self._count(value.value, node, ctx)

    def _count(self, inner: ast.expr, whole: ast.expr, ctx: RuleContext) -> None:
        found = self._sync_call(inner, ctx)
        if found is None or found[2] or found[1] is None or found[0].startswith("torch.where"):
            return
        assert isinstance(inner, ast.Call)
        if any(kw.arg == "out" for kw in inner.keywords):
            return
        torch = ctx.torch_alias()
        text = f"{torch or 'torch'}.count_nonzero({ctx.text(found[1])})"
        fix = ctx.fix(
            Applicability.UNSAFE,
            "Count on the device with `torch.count_nonzero`",
            [ctx.replace(whole, text)],
            imports=[] if torch else ["torch"],
        )
        ctx.report(inner, fix=fix, call=found[0])

    def visit_Assign(self, node: ast.Assign, ctx: RuleContext) -> None:
        """`x[torch.where(c)] = v` -> `x.masked_fill_(c, v)` (or a `torch.where` copy)."""
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Subscript):
            return
        target = node.targets[0]
        found = self._sync_call(target.slice, ctx)
        if found is None or not found[2] or found[1] is None:
            return
        assert isinstance(target.slice, ast.Call)
        x, cond, value = target.value, found[1], node.value
        if not is_simple_reference(x) or not ctx.is_bool_tensor(cond) or ctx.maybe_tensor(x) is False:
            return
        torch = ctx.torch_alias()
        t = torch or "torch"
        x_text, c_text, v_text = ctx.text(x), ctx.text(cond), ctx.text(value)
        v = ctx.value(value)
        if is_scalar_literal(value) or v.kind is Kind.PYTHON:
            replacement = f"{x_text}.masked_fill_({c_text}, {v_text})"
            imports: list[str] = []
        elif ctx.is_tensor(value) and v.zero_dim:
            replacement = f"{x_text}.copy_({t}.where({c_text}, {_paren(v_text, value)}.to({x_text}.dtype), {x_text}))"
            imports = [] if torch else ["torch"]
        else:
            return
        same_shape = mask_has_shape_of(cond, x, ctx.qualname)
        fix = ctx.fix(
            Applicability.SAFE if same_shape else Applicability.UNSAFE,
            "Write through the mask in place without computing indices",
            [ctx.replace(node, replacement)],
            imports=imports,
        )
        ctx.report(target.slice, fix=fix, call=found[0])


def _as_tuple(call: ast.Call) -> bool:
    for kw in call.keywords:
        if kw.arg == "as_tuple":
            return isinstance(kw.value, ast.Constant) and kw.value.value is True
    return False


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


def _paren(text: str, node: ast.AST) -> str:
    simple = isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant))
    return text if simple else f"({text})"

from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.shapes import is_scalar_literal, is_simple_reference, mask_has_shape_of
from perflint.facts.values import Kind
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import statement_line_bounds

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
      there instead, or fails. Unsafe. No fix when the count is read on the host in the loop
      that computes it (`if n:`, `range(n)`, `int(n)`, formatting, an index, any call
      argument, followed through the name it is assigned to): the sync would only move. A
      count accumulated and read only after the loop (`total += ...`, `float(total)` at the
      end) is fixed: it is then read once instead of every step.
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
    - The same write in two statements, `idx = torch.nonzero(c, as_tuple=True)` (or
      `torch.where(c)`) directly followed by `x[idx] = v`, gets the same fix (and the same
      safety) when `idx` is used nowhere else in the function: the first statement is
      removed. As above, `v` must be a Python number or a 0-dim tensor: a tensor `v` with
      dimensions gets no fix (`x[c] = v` with it would still sync).

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
                out = model(x)
                idx = torch.nonzero(out < 0, as_tuple=True)
                out[idx] = 0.0
            """,
            fixed="""
            import torch

            for x, y in loader:
                out = model(x)
                out.masked_fill_(out < 0, 0.0)
            """,
            note="indices computed in the statement before the write, and used nowhere else",
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
        if ctx.reaches_host(whole):
            return  # the count would be read back on the host: the sync would only move
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
        """`x[torch.where(c)] = v` -> `x.masked_fill_(c, v)` (or a `torch.where` copy), and
        `idx = torch.where(c); x[idx] = v` when `idx` is used nowhere else."""
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Subscript):
            return
        target = node.targets[0]
        if isinstance(target.slice, ast.Name):
            self._two_statement_write(node, target, ctx)
            return
        found = self._sync_call(target.slice, ctx)
        if found is None or not found[2] or found[1] is None:
            return
        assert isinstance(target.slice, ast.Call)
        made = self._write_replacement(node, target, found[1], ctx)
        if made is None:
            return
        replacement, imports, safe = made
        fix = ctx.fix(
            Applicability.SAFE if safe else Applicability.UNSAFE,
            "Write through the mask in place without computing indices",
            [ctx.replace(node, replacement)],
            imports=imports,
        )
        ctx.report(target.slice, fix=fix, call=found[0])

    def _write_replacement(self, node: ast.Assign, target: ast.Subscript, cond: ast.expr,
                           ctx: RuleContext) -> tuple[str, list[str], bool] | None:
        x, value = target.value, node.value
        if not is_simple_reference(x) or not ctx.is_bool_tensor(cond) or ctx.maybe_tensor(x) is False:
            return None
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
            return None
        return replacement, imports, mask_has_shape_of(cond, x, ctx.qualname)

    def _two_statement_write(self, node: ast.Assign, target: ast.Subscript, ctx: RuleContext) -> None:
        """`idx = torch.nonzero(c, as_tuple=True)` directly followed by `x[idx] = v`."""
        assert isinstance(target.slice, ast.Name)
        name = target.slice.id
        block = _block_of(node, ctx)
        if block is None:
            return
        position = block.index(node)
        if position == 0:
            return
        previous = block[position - 1]
        if not (isinstance(previous, ast.Assign) and len(previous.targets) == 1
                and isinstance(previous.targets[0], ast.Name) and previous.targets[0].id == name):
            return
        found = self._sync_call(previous.value, ctx)
        if found is None or not found[2] or found[1] is None:
            return
        if not _used_only_in(name, target.slice, previous.targets[0], ctx):
            return
        # the indices are computed right before the write; nothing between the two statements
        start, end_previous = ctx.offsets(previous)
        start_write, end = ctx.offsets(node)
        if ctx.source.text[end_previous:start_write].strip() not in ("", ";"):
            return  # a comment in between would be lost
        cond = found[1]
        made = self._write_replacement(node, target, cond, ctx)
        if made is None:
            return
        replacement, imports, safe = made
        if any(isinstance(sub, ast.Name) and sub.id == name for sub in ast.walk(cond)):
            return
        if statement_line_bounds(ctx, previous) is None:
            return
        fix = ctx.fix(
            Applicability.SAFE if safe else Applicability.UNSAFE,
            "Write through the mask in place without computing indices",
            [(start, end, replacement)],
            imports=imports,
        )
        ctx.report(previous.value, fix=fix, call=found[0])


def _block_of(statement: ast.stmt, ctx: RuleContext) -> list[ast.stmt] | None:
    parent = ctx.parent(statement)
    if parent is None:
        parent = ctx.analysis.tree
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(s is statement for s in block):
            return block
    return None


def _used_only_in(name: str, load: ast.Name, store: ast.Name, ctx: RuleContext) -> bool:
    """`name` appears in its scope only as `store` and `load` (no other read or write)."""
    scope = ctx.function_node or ctx.analysis.tree
    for sub in ast.walk(scope):
        if isinstance(sub, (ast.Global, ast.Nonlocal)) and name in sub.names:
            return False
        if isinstance(sub, ast.Name) and sub.id == name and sub is not load and sub is not store:
            return False
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and sub is not scope:
            args = sub.args
            if any(a.arg == name for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]):
                return False
    return True


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

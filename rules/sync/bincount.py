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
    torch.ones_like(x, dtype=torch.long))`: the same counts, dtype, length and device for
    every integer input with values in `[0, K)`. A value `>= K` is ordinary input (a label the
    batch happens to hold, a `minlength` computed from the data): `bincount` grows its result
    there while the fix fails (a device-side assert on CUDA). So the fix is applied only when
    `K` is a constant (a literal, or a module-level name assigned one) and the input is known to
    lie in `[0, K)` (`x.clamp(0, K - 1)`, `x % K`, `torch.randint(0, K, ...)`, or a name
    assigned one of them just before); otherwise it is display-only. It stays unsafe because
    `bool` and floating inputs make `bincount` raise while the fix counts them (floats
    truncated). With `weights` (`bincount` returns `float64` for non-`float32` weights) there
    is no fix.

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
                y = y.clamp(0, 9)
                d = torch.bincount(y, minlength=10)
            """,
            count=4,
            fixed="""
            import torch

            for x, y in loader:
                a = torch.bincount(y)
                b = y.bincount(weights=x)
                c = torch.bincount(y, minlength=10)
                y = y.clamp(0, 9)
                d = torch.zeros(10, dtype=torch.long, device=y.device).scatter_add_(
                    0, y.long(), torch.ones_like(y, dtype=torch.long)
                )
            """,
            unsafe_fixes=True,
            note="applied only where the values are known to lie in [0, minlength): display-only for `c`",
        ),
        Invalid(
            """
            import torch as T
            from torch import bincount as bc

            NUM_CLASSES = 21

            class Balance(T.nn.Module):
                def forward(self, logits, k: int):
                    counts = (logits.argmax(-1) % NUM_CLASSES).bincount(minlength=NUM_CLASSES)
                    other = bc(logits.argmax(0).clamp(0, 20), None, NUM_CLASSES)
                    third = T.Tensor.bincount(logits.argmax(1))
                    fourth = bc(logits.argmax(1), minlength=k)
                    return counts, other, third, fourth
            """,
            count=4,
            fixed="""
            import torch as T
            from torch import bincount as bc

            NUM_CLASSES = 21

            class Balance(T.nn.Module):
                def forward(self, logits, k: int):
                    counts = (
                        lambda i: T.zeros(NUM_CLASSES, dtype=T.long, device=i.device).scatter_add_(
                            0, i, T.ones_like(i)
                        )
                    )((logits.argmax(-1) % NUM_CLASSES).long())
                    other = (
                        lambda i: T.zeros(NUM_CLASSES, dtype=T.long, device=i.device).scatter_add_(
                            0, i, T.ones_like(i)
                        )
                    )(logits.argmax(0).clamp(0, 20).long())
                    third = T.Tensor.bincount(logits.argmax(1))
                    fourth = bc(logits.argmax(1), minlength=k)
                    return counts, other, third, fourth
            """,
            unsafe_fixes=True,
            note="an input that is not a plain name is evaluated once; a module-level constant bound; "
                 "`minlength=k` from a parameter is not known to hold (display-only)",
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
    allowed: dict[str, int | None] = {"weights": offset, "minlength": offset + 1}
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
    # Values at or past `minlength` are ordinary input (a label the batch happens to hold, a
    # bound computed from the data): the rewrite is applied only where the facts prove every
    # value lies in [0, K) for a constant K; elsewhere it is only shown.
    bound = _constant(minlength, ctx)
    proven = bound is not None and _values_in_range(source, bound, ctx, depth=0)
    applicability = Applicability.UNSAFE if proven else Applicability.DISPLAY_ONLY
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
        applicability,
        "Count into `minlength` bins with `scatter_add_` (no host read; values must be below it)",
        [ctx.replace(node, text)],
        imports=imports,
    )


def _int(node: ast.expr | None) -> int | None:
    value = literal(node)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _constant(node: ast.expr, ctx: RuleContext) -> int | None:
    """An int literal, or a module-level name assigned one int literal exactly once."""
    value = _int(node)
    if value is not None or not isinstance(node, ast.Name):
        return value
    found = [stmt for stmt in ctx.analysis.tree.body if isinstance(stmt, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets)]
    stores = sum(1 for n in ast.walk(ctx.analysis.tree)
                 if isinstance(n, ast.Name) and n.id == node.id and not isinstance(n.ctx, ast.Load))
    if len(found) == 1 and stores == 1 and len(found[0].targets) == 1:
        return _int(found[0].value)
    return None


def _values_in_range(node: ast.expr, bound: int, ctx: RuleContext, depth: int) -> bool:
    """Are the values of `node` known to lie in [0, bound)? `x.clamp(0, k)` / `torch.clamp`
    / `clip` with 0 <= k < bound, `x % k` / `remainder` with 0 < k <= bound,
    `torch.randint(low, high, ...)` with 0 <= low and high <= bound, dtype casts of those,
    and a name assigned one of them just before, in the same block."""
    if depth > 4:
        return False
    if isinstance(node, ast.Name):
        value = _assigned_before(node.id, ctx)
        return value is not None and _values_in_range(value, bound, ctx, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        k = _constant(node.right, ctx)
        return k is not None and 0 < k <= bound
    if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args) \
            or any(kw.arg is None for kw in node.keywords):
        return False
    name = ctx.call_name(node)
    method = node.func.attr if name is None and isinstance(node.func, ast.Attribute) else None
    if method in ("long", "int", "short") and isinstance(node.func, ast.Attribute) and not node.args:
        return _values_in_range(node.func.value, bound, ctx, depth + 1)
    if name in ("torch.clamp", "torch.clip") or method in ("clamp", "clip"):
        offset = 1 if name else 0
        low, high = _int(argument(node, offset, "min")), _int(argument(node, offset + 1, "max"))
        return low is not None and high is not None and 0 <= low and high < bound
    if name == "torch.remainder" or method == "remainder":
        other = argument(node, 1 if name else 0, "other")
        k = _constant(other, ctx) if other is not None else None
        return k is not None and 0 < k <= bound
    if name == "torch.randint":
        if len(node.args) >= 3:
            low, high = _int(node.args[0]), _int(node.args[1])
        else:
            low, high = 0, _int(argument(node, 0, "high"))
        return low is not None and high is not None and 0 <= low and high <= bound
    return False


def _assigned_before(name: str, ctx: RuleContext) -> ast.expr | None:
    """The value assigned to `name` by the last statement binding it before the current one,
    in the same block, when that statement is a plain `name = value`."""
    statement = ctx.statement
    block = _block_of(statement, ctx)
    if block is None or statement is None:
        return None
    for stmt in reversed(block[: block.index(statement)]):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and stmt.targets[0].id == name:
            return stmt.value
        if any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in ast.walk(stmt)):
            return None
    return None


def _block_of(statement: ast.stmt | None, ctx: RuleContext) -> list[ast.stmt] | None:
    if statement is None:
        return None
    parent = ctx.parent(statement)
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(stmt is statement for stmt in block):
            return block
    return None

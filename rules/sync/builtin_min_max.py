from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.values import Kind
from perflint.rule import Benchmark, Invalid, Rule, Valid

_BUILTINS = {"builtins.max": "max", "builtins.min": "min", "builtins.sorted": "sorted"}


class BuiltinMinMaxOnTensors(Rule):
    """## What it does
    Checks for Python's builtin `max()`, `min()` and `sorted()` comparing tensors in code
    that runs every step: `max(a, b)` or `min(t, 1.0)` where an argument is a tensor, and
    `max(t)` / `min(t)` / `sorted(t)` iterating a tensor or a list of tensors.

    Calls with `key=` compare the keys, not the tensors, and are not reported.

    ## Why is this bad?
    The builtins compare with `>` / `<` and then need a Python `bool`, so every comparison
    copies a result to the host and waits for the GPU. `max(t)` over a tensor with n
    elements does that n - 1 times, and iterates in Python.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        worst = max(worst, loss.detach())
        clipped = min(loss, torch.tensor(10.0, device=device))
    ```

    ## Use instead
    The tensor functions compare on the device:
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        worst = torch.maximum(worst, loss.detach())
        clipped = loss.clamp(max=10.0)
    ```
    Use `t.max()`, `t.min()` and `torch.sort(t)` for one tensor, and `torch.stack(ts).max()`
    for a list of 0-dim tensors. Note that `torch.maximum` propagates NaN where the builtin
    may not, and returns a new tensor rather than one of its arguments.

    ## References
    - [Performance tuning guide: avoid unnecessary CPU-GPU synchronization](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization)
    """

    code = "PFL208"
    name = "builtin-min-max-on-tensors"
    message = "builtin `{call}()` compares tensors on the host, waiting for the GPU at each comparison"
    triggers = (b"max(", b"min(", b"sorted(")
    invalid = [
        Invalid(
            """
            import torch

            best = torch.zeros(())
            for x, y in loader:
                loss = criterion(model(x), y)
                best = max(best, loss.detach())
                low = min(loss, 1.0)
                peak = max(model(x).flatten())
                order = sorted(model(x).argmax(1))
                losses = [loss, loss * 2]
                top = max(losses)
            """,
            count=5,
        ),
        Invalid(
            """
            import torch

            class Clip(torch.nn.Module):
                def forward(self, x):
                    scale = max(x.abs().max(), 1e-6)
                    return x / scale
            """,
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x, y):
                    n = max(x.size(0), y.size(0))
                    m = min(x.shape)
                    widest = max([x, y], key=lambda t: t.shape[-1])
                    s = sorted(x.shape)
                    z = torch.max(x, y)
                    return x[:n] + z
            """,
            note="Python numbers, shapes, `key=`, and torch.max",
        ),
        Valid(
            """
            import numpy as np

            for x, y in loader:
                a = np.zeros(3)
                b = max(a.sum(), 1.0)
                c = sorted(a)
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            losses = []
            for x, y in loader:
                losses.append(criterion(model(x), y).detach())
            worst = max(losses)
            """,
            note="once after the loop",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self, scales):
                    super().__init__()
                    self.top = max(torch.tensor(scales, device="cuda"))
            """,
            note="__init__ runs once",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
            floor = torch.tensor(0.0, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            result = max(y.mean(), floor)
        """,
        good="""
            y = torch.tanh(x)
            result = torch.maximum(y.mean(), floor)
        """,
        description="builtin `max(a, b)` on 0-dim tensors vs `torch.maximum`",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        call = _BUILTINS.get(ctx.call_name(node) or "")
        if call is None or any(kw.arg == "key" or kw.arg is None for kw in node.keywords):
            return
        args = [a for a in node.args if not isinstance(a, ast.Starred)]
        if len(args) != len(node.args) or not args:
            return
        if len(args) == 1 or call == "sorted":
            if _iterates_tensors(args[0], ctx):
                ctx.report(node, call=call)
            return
        if any(ctx.is_tensor(arg) for arg in args):
            ctx.report(node, call=call)


def _iterates_tensors(node: ast.expr, ctx: RuleContext) -> bool:
    """Iterating `node` yields tensors that may live on the GPU (a tensor, a list of them)."""
    if ctx.is_tensor(node):
        return True
    value = ctx.value(node)
    elem = value.elem
    return value.kind is Kind.SEQ and elem is not None and elem.kind is Kind.TENSOR and not elem.on_cpu

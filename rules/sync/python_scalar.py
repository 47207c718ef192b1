from __future__ import annotations

import ast

from perflint.facts.calls import converts_to_python_scalar
from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid


class TensorToPythonScalar(Rule):
    """## What it does
    Checks for converting a tensor to a Python number in code that runs every step:
    `float(t)`, `int(t)`, `bool(t)`, `complex(t)`, `operator.index(t)`, `math` functions
    such as `math.sqrt(t)`, `math.isnan(t)` or `math.exp(t)`, and `t.is_nonzero()`.

    Sizes and counts are Python values already and are not reported: `int(x.size(0))`,
    `float(x.numel())`, `int(t.shape[0])`. `float(t.item())` is reported once, by
    `tensor-item` (PFL201).

    ## Why is this bad?
    Each of these calls `Tensor.__float__` / `__int__` / `__index__` / `__bool__`, which
    reads the value with `item()`: a blocking copy to the host that waits until the GPU has
    finished everything queued before it. The GPU then idles while the CPU prepares the
    next step.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        if math.isnan(loss):
            break
        running += float(loss)
    ```

    ## Use instead
    Keep the value on the device, and read it every N steps or after the loop:
    ```python
    running = torch.zeros((), device=device)
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        running += loss.detach()
    print(float(running))
    ```
    Use tensor operations (`torch.sqrt`, `torch.isnan`, `torch.where`) instead of `math`
    functions on tensors.

    ## References
    - [Performance tuning guide: avoid unnecessary CPU-GPU synchronization](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization)
    """

    code = "PFL204"
    name = "tensor-to-python-scalar"
    message = "`{call}` converts a tensor to a Python number, copying it to the host and waiting for the GPU every step"
    triggers = (b"float(", b"int(", b"bool(", b"complex(", b"math", b"operator", b"is_nonzero")
    invalid = [
        Invalid(
            """
            import math
            import operator
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
                a = float(loss)
                b = int(y.max())
                c = bool(torch.isnan(loss))
                d = complex(loss)
                e = math.sqrt(loss)
                f = math.isfinite(loss)
                g = operator.index(y.max())
                h = loss.is_nonzero()
            """,
            count=8,
        ),
        Invalid(
            """
            import torch
            from math import exp, log as ln

            class Perplexity(torch.nn.Module):
                def forward(self, logits, target):
                    nll = torch.nn.functional.cross_entropy(logits, target)
                    return exp(nll), ln(nll)
            """,
            count=2,
            note="`from math import` aliases",
        ),
    ]
    valid = [
        Valid(
            """
            import math
            import torch

            class Net(torch.nn.Module):
                def forward(self, x, t):
                    n = int(x.size(0))
                    m = float(x.numel())
                    k = int(t.shape[0])
                    d = int(x.dim())
                    scale = math.sqrt(x.shape[-1])
                    p = math.prod(x)
                    return x * scale / n * p
            """,
            note="sizes and counts are Python values; `math.prod` multiplies tensors on the device",
        ),
        Valid(
            """
            import numpy as np

            for x, y in loader:
                a = np.zeros(3)
                b = float(a.sum())
                c = int(np.argmax(a))
                d = float("1.5")
            """,
            note="numpy and Python values",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
                value = float(loss.item())
                count = int(torch.zeros(3).sum())
            """,
            note="`float(t.item())` is PFL201's finding; CPU tensors never wait",
        ),
        Valid(
            """
            import torch

            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                if step % 50 == 0:
                    print(float(loss))
            print(float(loss))
            """,
            note="every N steps, and once after the loop",
        ),
        Valid(
            """
            import math
            import torch

            class Net(torch.nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.scale = float(torch.randn(dim, device="cuda").norm())
            """,
            note="__init__ runs once",
        ),
        Valid(
            """
            import torch

            def train_one_epoch(model, criterion, data_loader, optimizer, device):
                for images, targets in data_loader:
                    samples = images[0].to(device)
                    outputs = model(samples)
                    num_labels = targets[0]["labels"].item()
                    num_boxes = int(targets[0]["boxes"].shape[0])
                    first = float(targets[1]["area"].sum())
                    loss = criterion(outputs, num_labels, num_boxes, first)
                    loss.backward()
                    optimizer.step()
            """,
            note="targets the loop never moves stay in host memory",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            result = float(y.mean())
        """,
        good="""
            y = torch.tanh(x)
            result = y.mean()
        """,
        description="`float(t)` every step vs keep the value on the device",
        compare="close",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name is not None and converts_to_python_scalar(name):
            if any(ctx.is_tensor(arg) for arg in node.args if not isinstance(arg, ast.Starred)):
                ctx.report(node, call=f"{_short(name)}()")
            return
        if name == "torch.is_nonzero":
            if node.args and ctx.maybe_tensor(node.args[0]):
                ctx.report(node, call="torch.is_nonzero()")
            return
        if node.args and not (isinstance(node.func, ast.Attribute) and ctx.qualname(node.func)):
            return
        call = ctx.method_call(node, "is_nonzero")
        if call is not None and ctx.maybe_tensor(call[0]):
            ctx.report(node, call=".is_nonzero()")


def _short(qualname: str) -> str:
    return qualname[len("builtins."):] if qualname.startswith("builtins.") else qualname

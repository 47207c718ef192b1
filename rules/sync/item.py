from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability


class TensorItem(Rule):
    """## What it does
    Checks for `.item()` on a tensor in code that runs every step: the body of a loop over
    a DataLoader or a training loop, `forward()`, a loss, or a function called from them.

    ## Why is this bad?
    `t.item()` copies one value from the GPU to the host. The copy is blocking, so the CPU
    waits until the GPU has finished every kernel queued before it, and the GPU then sits
    idle while the CPU prepares the next step. Calling it once per step to log the loss is
    the most common reason a training loop cannot keep the GPU busy.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
    ```

    ## Use instead
    Keep the running value on the device and read it once, every N steps or at the end:
    ```python
    running_loss = torch.zeros((), device=device)
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running_loss += loss.detach()
    print(running_loss.item())
    ```

    ## Fix safety
    One use has a fix: counting a boolean mask, `m.sum().item()`, becomes `m.sum()`, the same
    count as a 0-dim tensor that stays on the device (`correct += (pred == y).sum()`). It is
    unsafe because the result is a tensor instead of a Python `int`: code that needs an `int`
    (`range(n)`, formatting with `:d`, JSON) fails or syncs there instead. Other uses have no
    automatic fix: what replaces `.item()` depends on what the value is used for.

    ## References
    - [PyTorch performance tuning guide: avoid unnecessary CPU-GPU synchronization](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization)
    """

    code = "PFL201"
    name = "tensor-item"
    fix_availability = FixAvailability.SOMETIMES
    message = "`.item()` copies a tensor value to the host and waits for the GPU every step"
    triggers = (b".item(",)
    invalid = [
        Invalid(
            """
            for x, y in loader:
                loss = criterion(model(x), y)
                total += loss.item()
            """
        ),
        Invalid(
            """
            import torch as T

            def accuracy(logits, labels):
                return (logits.argmax(1) == labels).float().mean().item()

            for images, labels in train_loader:
                acc = accuracy(model(images), labels)
            """,
            note="a helper called from the loop is hot, and data flows through its parameters",
        ),
        Invalid(
            """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x):
                    scale = x.abs().max().item()
                    return x / scale
            """
        ),
        Invalid(
            """
            import torch

            for step, batch in enumerate(loader):
                out = model(batch)
                value = torch.Tensor.item(out.mean())
            """,
            note="the unbound method form",
        ),
        Invalid(
            """
            for x, y in loader:
                pred = model(x).argmax(1)
                correct += (pred == y).sum().item()
            """,
            unsafe_fixes=True,
            fixed="""
            for x, y in loader:
                pred = model(x).argmax(1)
                correct += (pred == y).sum()
            """,
            note="counting a mask",
        ),
    ]
    valid = [
        Valid(
            """
            import numpy as np

            for x, y in loader:
                arr = np.zeros(3)
                total += arr.item()
            """,
            note="numpy's .item() does not sync",
        ),
        Valid(
            """
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
            print(loss.item())
            """,
            note="once after the loop",
        ),
        Valid(
            """
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                if step % 100 == 0:
                    print(loss.item())
            """,
            note="logging every N steps is the recommended pattern",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.scale = torch.ones(1).item()
            """,
            note="__init__ runs once",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            loss = torch.tanh(x).mean()
            result = loss.item()
        """,
        good="""
            loss = torch.tanh(x).mean()
            result = loss.detach()
        """,
        description="read the loss with `.item()` every step vs keep it on the device",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        if node.args and not (isinstance(node.func, ast.Attribute) and ctx.qualname(node.func)):
            return
        call = ctx.method_call(node, "item")
        if call is None:
            return
        receiver, _ = call
        if ctx.maybe_tensor(receiver):
            ctx.report(node, fix=self._count_fix(node, receiver, ctx))

    def _count_fix(self, node: ast.Call, receiver: ast.expr, ctx: RuleContext):
        """`mask.sum().item()` -> `mask.sum()`: a count that stays on the device."""
        if not (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
                and receiver.func.attr == "sum" and not receiver.args and not receiver.keywords
                and isinstance(node.func, ast.Attribute) and node.func.value is receiver):
            return None
        if not ctx.is_bool_tensor(receiver.func.value):
            return None
        return ctx.fix(Applicability.UNSAFE, "Keep the count on the device",
                       [ctx.replace(node, ctx.text(receiver))])

from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import receiver_text


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
    Counting a boolean mask, `m.sum().item()`, becomes `m.sum()`: the same count as a 0-dim
    `int64` tensor that stays on the device (`correct += (pred == y).sum()`). It is unsafe
    because the result is a tensor, not an `int` (`json.dumps`, `is`, `type()` see the
    difference). It is offered only when nothing reads the count to the host again as often as
    it is made (`if n:`, `int(n)`, `range(n)`, formatting, a list index, a non-torch call): there
    the rewrite would only move the sync.

    A per-step logging list, `losses.append(loss.item())` in a loop, gets a display-only
    suggestion: append `loss.detach()` and read the list once after the loop
    (`torch.stack(losses).tolist()`: the same floats, one sync; guard an empty list, where
    `torch.stack` raises). It is never applied: every later reader of the list must change too.

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
        Invalid(
            """
            for x, y in loader:
                pred = model(x).argmax(1)
                if (pred == y).sum().item():
                    hits += int((pred != y).sum().item())
            """,
            count=2,
            unsafe_fixes=True,
            fixed="""
            for x, y in loader:
                pred = model(x).argmax(1)
                if (pred == y).sum().item():
                    hits += int((pred != y).sum().item())
            """,
            note="no fix where the count is read to the host anyway: the sync would only move",
        ),
        Invalid(
            """
            import torch

            def train(model, loader, criterion):
                for x, y in loader:
                    seen = (model(x).argmax(1) == y).sum().item()
                    print(f"{seen} right")
            """,
            unsafe_fixes=True,
            fixed="""
            import torch

            def train(model, loader, criterion):
                for x, y in loader:
                    seen = (model(x).argmax(1) == y).sum().item()
                    print(f"{seen} right")
            """,
            note="the count is formatted one statement later: no fix",
        ),
        Invalid(
            """
            losses = []
            for x, y in loader:
                loss = criterion(model(x), y)
                losses.append(loss.item())
            print(sum(losses) / len(losses))
            """,
            unsafe_fixes=True,
            fixed="""
            losses = []
            for x, y in loader:
                loss = criterion(model(x), y)
                losses.append(loss.item())
            print(sum(losses) / len(losses))
            """,
            note="a per-step logging list: a display-only suggestion to keep the tensors and read "
                 "them once (`torch.stack(losses).tolist()`) after the loop",
        ),
        Invalid(
            """
            import torch

            def train_one_epoch(model, criterion, data_loader, optimizer, device):
                for images, targets in data_loader:
                    samples = images.to(device)
                    targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
                    outputs = model(samples)
                    num_labels = targets[0]["labels"].item()
                    loss = criterion(outputs, num_labels)
                    loss.backward()
                    optimizer.step()
            """,
            note="the twin: targets moved to the device are read back from it",
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
        Valid(
            """
            import torch

            losses = []
            for x, y in loader:
                loss = criterion(model(x), y)
                losses.append(loss.detach())
            history = torch.stack(losses).tolist()
            """,
            note="the logging list keeps the tensors and is read once, after the loop",
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
            note="the loop moves its images; the targets it never moves stay in host memory",
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
            fix = self._count_fix(node, receiver, ctx) or self._logging_list(node, receiver, ctx)
            ctx.report(node, fix=fix)

    def _count_fix(self, node: ast.Call, receiver: ast.expr, ctx: RuleContext):
        """`mask.sum().item()` -> `mask.sum()`: a count that stays on the device."""
        if not (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
                and receiver.func.attr == "sum" and not receiver.args and not receiver.keywords
                and isinstance(node.func, ast.Attribute) and node.func.value is receiver):
            return None
        if not ctx.is_bool_tensor(receiver.func.value):
            return None
        if ctx.reaches_host(node):  # `if n:`, `int(n)`...: the rewrite would only move the sync
            return None
        return ctx.fix(Applicability.UNSAFE, "Keep the count on the device",
                       [ctx.replace(node, ctx.text(receiver))])

    def _logging_list(self, node: ast.Call, receiver: ast.expr, ctx: RuleContext):
        """`losses.append(loss.item())` in a loop: suggest keeping the tensors (display-only)."""
        parent = ctx.parent(node)
        if not (ctx.in_loop and isinstance(parent, ast.Call) and parent.args == [node] and not parent.keywords
                and isinstance(parent.func, ast.Attribute) and parent.func.attr == "append"
                and isinstance(parent.func.value, ast.Name)
                and isinstance(node.func, ast.Attribute) and node.func.value is receiver and not node.args):
            return None
        name = parent.func.value.id
        return ctx.fix(
            Applicability.DISPLAY_ONLY,
            f"Keep the tensors (`{name}.append({receiver_text(ctx, receiver)}.detach())`) and read them once after the loop "
            f"(`torch.stack({name}).tolist()`)",
            [ctx.replace(node, f"{receiver_text(ctx, receiver)}.detach()")],
        )

from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid

from ._constants import (
    DATA_FACTORIES,
    constant_call,
    host_constant,
    moved_to_device,
    on_device,
    scratch_buffer,
    torch_factory,
    trivial,
)


class ConstantTensorInHotPath(Rule):
    """## What it does
    Checks for tensors built from constant data in code that runs every step:
    `torch.tensor([0.485, 0.456, 0.406], device=x.device)`, `torch.as_tensor(...)`, the legacy
    constructors (`torch.LongTensor([0, 1, -1])`) and `x.new_tensor([...])`, where every
    argument is a literal (a `device=` and a `dtype=` may be any expression).

    Constants made by filling (`torch.arange(10, device=d)`, `torch.ones(3, 3)`,
    `torch.eye(4)`) cost an allocation and a kernel, not a copy: they are PFL108's, which is
    not enabled by default.

    ## Why is this bad?
    The same tensor is rebuilt on every step. `torch.tensor([...])` parses the Python list on
    the host and, with `device=` set to a GPU (or `x.new_tensor([...])` on a GPU tensor),
    copies it there with a blocking transfer: the CPU waits for the GPU each time. Built on
    the CPU, it is copied later (`.to(x.device)`), with the same wait. Built once, the
    tensor costs nothing per step.

    A constant moved to the device (`torch.tensor([0.1, 0.2]).cuda()`) is one finding, this
    one, which says it is copied: not also create-then-move's (PFL101), whose fix would
    only move the copy into `device=`.

    ## Example
    ```python
    import torch

    class Normalize(torch.nn.Module):
        def forward(self, x):
            mean = torch.tensor([0.485, 0.456, 0.406], device=x.device)
            return x - mean.view(1, 3, 1, 1)
    ```

    ## Use instead
    ```python
    import torch

    class Normalize(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))

        def forward(self, x):
            return x - self.mean
    ```
    A buffer moves with the module (`model.to(device)`), is saved in its `state_dict` (pass
    `persistent=False` to keep it out), and is built once. An accumulator the step updates in
    place (`total = torch.tensor(0.0, device=d)`, then `total += loss`) cannot be shared
    between steps: fill it on the device instead, `total = torch.zeros((), device=d)`, which
    launches a fill and copies nothing.

    ## Fix safety
    There is no automatic fix: hoisting the tensor means choosing where it lives (a buffer,
    a module attribute, a global) and on which device, and a tensor that the code later
    modifies in place must not be shared between steps.

    ## References
    - [`Module.register_buffer`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.register_buffer)
    - [Performance tuning guide: create tensors directly on the target device](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#create-tensors-directly-on-the-target-device)
    """

    code = "PFL106"
    name = "constant-tensor-in-hot-path"
    supersedes = ("PFL101",)  # `torch.tensor([0.1, 0.2]).cuda()`: rebuilt and copied, one finding
    message = "`{call}()` builds the same constant tensor every step; build it once (a buffer or a module attribute)"
    family = "data"
    triggers = (b"torch",)
    invalid = [
        Invalid(
            """
            import torch

            class Head(torch.nn.Module):
                def forward(self, x):
                    scale = torch.tensor([1.0, 2.0, 4.0], device=x.device, dtype=x.dtype)
                    shift = torch.as_tensor([0.5], device=x.device)
                    idx = torch.arange(8, device=x.device)
                    return x * scale + shift, idx
            """,
            count=2,
            note="`arange` fills on the device: PFL108's",
        ),
        Invalid(
            """
            import torch as T

            for images, labels in loader:
                weights = T.full((10,), 0.1, device="cuda")
                offsets = T.LongTensor([0, 1, -1])
                loss = criterion(model(images), labels)
            """,
            note="a legacy constructor (copied when moved); `full` is PFL108's",
        ),
        Invalid(
            """
            import torch

            def normalize_batch(batch):
                mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
                std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
                return (batch / 255.0 - mean) / std

            for x, _ in loader:
                loss = model(normalize_batch(x.to(device))).mean()
            """,
            count=2,
            note="`new_tensor` copies the list to the receiver's device",
        ),
        Invalid(
            """
            import torch

            def train_batch(model, micro_batches, device):
                ce_batch_loss = torch.tensor(0.0, device=device)
                for micro_batch in micro_batches:
                    ce_batch_loss += model(micro_batch.to(device)).mean()
                return ce_batch_loss

            for batch in loader:
                loss = train_batch(model, batch.split(4), "cuda")
                loss.backward()
            """,
            note="an accumulator started with a copy from the host (fill it on the device instead)",
        ),
        Invalid(
            """
            import torch

            class RegressionLoss(torch.nn.Module):
                def forward(self, regression, targets):
                    targets = targets / torch.Tensor([[0.1, 0.1, 0.2, 0.2]]).cuda()
                    std = torch.tensor([0.5, 0.5]).float().to(regression.device)
                    return (regression - targets).abs().mean() * std.sum()
            """,
            count=2,
            note="constants built on the host and moved: copied every step (one finding each, not also PFL101)",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            class Head(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("scale", torch.tensor([1.0, 2.0, 4.0]))

                def forward(self, x):
                    n = x.shape[0]
                    idx = torch.arange(n, device=x.device)
                    buf = torch.empty(3, device=x.device)
                    noise = torch.randn(3)
                    return x * self.scale, idx, buf, noise
            """,
            note="built in __init__; shapes from data; scratch buffers and random draws",
        ),
        Valid(
            """
            import torch

            scale = torch.tensor([1.0, 2.0])
            for x, y in loader:
                out = model(x) * scale
            """,
            note="already built once",
        ),
        Valid(
            """
            import torch

            class Head(torch.nn.Module):
                def forward(self, x, mask):
                    zero = torch.full((), 0.0, device=x.device)
                    none = torch.zeros(0, 4, device=x.device)
                    empty = torch.tensor([], device=x.device)
                    flag = x == torch.tensor(False)
                    acc = torch.zeros(3, device=x.device)
                    acc += x.sum()
                    return torch.where(mask, zero, x), none, empty, flag, acc
            """,
            note="0-dim and empty tensors, CPU scalars, and a buffer written in place",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(64, 3, 224, 224, device=device)
            mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1)
        """,
        bad="""
            result = x - torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1)
        """,
        good="""
            result = x - mean
        """,
        description="a per-step `torch.tensor([...], device=...)` vs one built once",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        factory = torch_factory(node, ctx, DATA_FACTORIES)
        if factory is None:
            self._new_tensor(node, ctx)
            return
        if not constant_call(node, ctx) or trivial(node, factory):
            return
        if scratch_buffer(node, ctx):
            if on_device(node, ctx):  # `total = torch.tensor(0.0, device=d)`, then `total += ...`
                ctx.report(node, self.scratch_message, call=ctx.text(node.func))
            return
        if on_device(node, ctx):
            ctx.report(node, self.copy_message, call=ctx.text(node.func))
            return
        if host_constant(node, ctx):  # a CPU scalar (`torch.tensor(0.5)`) is passed by value
            # `torch.tensor([...]).cuda()`: rebuilt and copied, one finding (not create-then-move's)
            message = self.copy_message if moved_to_device(node, ctx) else None
            ctx.report(node, message, call=ctx.text(node.func))

    copy_message = ("`{call}()` copies the same constant to the device every step, a blocking "
                    "host-to-device copy; build it once (a buffer or a module attribute)")
    scratch_message = ("`{call}()` copies a constant to the device every step to start a buffer the step "
                       "updates, a blocking host-to-device copy; fill it on the device "
                       "(`torch.zeros((), device=...)`, `torch.full(...)`)")

    def _new_tensor(self, node: ast.Call, ctx: RuleContext) -> None:
        """`x.new_tensor([0.485, 0.456, 0.406])`: a constant copied to `x`'s device."""
        method = ctx.method_call(node, "new_tensor")
        if method is None or not node.args or not isinstance(node.args[0], (ast.List, ast.Tuple)):
            return
        if not ctx.maybe_tensor(method[0]) or not constant_call(node, ctx) or trivial(node, "tensor"):
            return
        ctx.report(node, self.scratch_message if scratch_buffer(node, ctx) else self.copy_message,
                   call=ctx.text(node.func))

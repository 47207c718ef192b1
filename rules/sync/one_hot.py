from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rewrite import RewriteError, add_keyword
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import argument, device_input, literal, opaque_arguments

_PLACEHOLDER = "NUM_CLASSES"


class OneHotWithoutNumClasses(Rule):
    """## What it does
    Checks for `F.one_hot(y)` / `torch.nn.functional.one_hot(y)` without `num_classes` (or
    with `num_classes=-1`) in code that runs every step.

    ## Why is this bad?
    Without `num_classes`, the number of columns is `y.max() + 1`, which PyTorch reads to
    the host with `.item()`: the CPU waits for every queued kernel. With `num_classes` given,
    the CUDA implementation skips its checks and relies on device-side asserts, so nothing
    is read back.

    ## Example
    ```python
    for x, y in loader:
        logits = model(x)
        target = F.one_hot(y).float()
        loss = (logits - target).pow(2).mean()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        logits = model(x)
        target = F.one_hot(y, num_classes=logits.shape[-1]).float()
        loss = (logits - target).pow(2).mean()
    ```

    ## Fix safety
    The suggested fix adds `num_classes=` with a placeholder and is display-only: the result
    is the same only when the value equals `y.max() + 1` for every batch, which only the
    author knows. A larger value adds zero columns; a label outside the range becomes a
    device-side assert on CUDA.

    ## References
    - `one_hot` in aten/src/ATen/native/Onehot.cpp: `num_classes = self.max().item() + 1`
      when `num_classes == -1`.
    """

    code = "PFL221"
    name = "one-hot-without-num-classes"
    message = "`one_hot` without `num_classes` reads the largest label to the host and waits for the GPU every step"
    triggers = (b"one_hot",)
    fix_availability = FixAvailability.SOMETIMES
    invalid = [
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            for x, y in loader:
                a = F.one_hot(y)
                b = torch.nn.functional.one_hot(y, -1)
                c = F.one_hot(y, num_classes=-1)
            """,
            count=3,
        ),
        Invalid(
            """
            import torch
            from torch.nn.functional import one_hot as oh

            class Head(torch.nn.Module):
                def forward(self, x, labels):
                    return x * oh(labels.long())
            """,
            fixed="""
            import torch
            from torch.nn.functional import one_hot as oh

            class Head(torch.nn.Module):
                def forward(self, x, labels):
                    return x * oh(labels.long())
            """,
            unsafe_fixes=True,
            note="the fix is display-only: never applied",
        ),
    ]
    valid = [
        Valid(
            """
            import torch.nn.functional as F

            for x, y in loader:
                a = F.one_hot(y, 10)
                b = F.one_hot(y, num_classes=model.num_classes)
            """,
            note="num_classes given",
        ),
        Valid(
            """
            import torch
            import torch.nn.functional as F

            class Net(torch.nn.Module):
                def __init__(self, labels):
                    super().__init__()
                    self.table = F.one_hot(labels)
            """,
            note="once, at construction",
        ),
        Valid(
            """
            import torch
            import torch.nn.functional as F

            for x, y in loader:
                ids = torch.arange(4)
                table = F.one_hot(ids)
            """,
            note="a CPU tensor",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
            labels = torch.randint(0, 100, (4096,), device=device)
            labels[0] = 99
        """,
        bad="""
            y = torch.tanh(x)
            shifted = labels * (y[0, 0] < 2).long()
            result = torch.nn.functional.one_hot(shifted)
        """,
        good="""
            y = torch.tanh(x)
            shifted = labels * (y[0, 0] < 2).long()
            result = torch.nn.functional.one_hot(shifted, num_classes=100)
        """,
        description="`one_hot` without vs with `num_classes`",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        if ctx.call_name(node) != "torch.nn.functional.one_hot" or opaque_arguments(node):
            return
        source = argument(node, 0, "input")
        if source is None:
            source = argument(node, 0, "tensor")
        if source is not None and not device_input(ctx, source):
            return
        classes = argument(node, 1, "num_classes")
        if classes is not None and literal(classes) != -1:
            return
        if classes is not None:
            edit = ctx.replace(classes, _PLACEHOLDER)
        else:
            try:
                edit = ctx.rewrite(node, lambda call: add_keyword(call, "num_classes", _PLACEHOLDER))
            except RewriteError:
                edit = None
        fix = None
        if edit is not None:
            fix = ctx.fix(Applicability.DISPLAY_ONLY,
                          "Pass `num_classes=` (the number of classes, known on the host)", [edit])
        ctx.report(node, fix=fix)

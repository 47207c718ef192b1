from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid


class TensorTolist(Rule):
    """## What it does
    Checks for `t.tolist()` (and `torch.Tensor.tolist(t)`) on a tensor in code that runs
    every step.

    ## Why is this bad?
    `tolist()` first copies the tensor to host memory (`toBackend(CPU)`), a blocking copy
    that waits for every kernel queued before it, and then builds a Python object for each
    element. In a training or inference loop the GPU idles while the CPU waits, once per
    step.

    ## Example
    ```python
    for x, y in loader:
        logits = model(x)
        preds = logits.argmax(1).tolist()
        all_preds.extend(preds)
    ```

    ## Use instead
    Keep the values on the device and copy them once, after the loop:
    ```python
    for x, y in loader:
        logits = model(x)
        all_preds.append(logits.argmax(1))
    preds = torch.cat(all_preds).tolist()
    ```

    ## References
    - [Performance tuning guide: avoid unnecessary CPU-GPU synchronization](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization)
    - `tensor_to_list` in torch/csrc/utils/tensor_list.cpp copies to the CPU first.
    """

    code = "PFL202"
    name = "tensor-tolist"
    message = "`.tolist()` copies a tensor to the host and waits for the GPU every step"
    triggers = (b"tolist",)
    invalid = [
        Invalid(
            """
            import torch

            for images, labels in loader:
                scores = model(images).softmax(-1)
                top = scores.topk(5, dim=-1).indices.tolist()
                ids = labels.tolist()
            """,
            count=2,
        ),
        Invalid(
            """
            import torch

            class Decoder(torch.nn.Module):
                def forward(self, tokens: torch.Tensor):
                    lengths = (tokens != 0).sum(1)
                    return torch.Tensor.tolist(lengths)
            """,
            note="the unbound method form, inside forward()",
        ),
    ]
    valid = [
        Valid(
            """
            import numpy as np
            import pandas as pd

            for x, y in loader:
                arr = np.arange(4)
                values = arr.tolist()
                names = [1, 2].copy()
            """,
            note="numpy arrays and Python lists",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                cpu_preds = out.argmax(1).cpu()
                ids = cpu_preds.tolist()
                steps = torch.arange(4).tolist()
            """,
            note="tensors known to be on the CPU (the `.cpu()` copy is PFL203's finding)",
        ),
        Valid(
            """
            import torch

            preds = []
            for x, y in loader:
                preds.append(model(x).argmax(1))
            result = torch.cat(preds).tolist()
            """,
            note="once, after the loop",
        ),
        Valid(
            """
            import torch

            for step, (x, y) in enumerate(loader):
                out = model(x)
                if step % 100 == 0:
                    print(out.argmax(1).tolist())
            """,
            note="every N steps",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self, sizes):
                    super().__init__()
                    self.sizes = torch.tensor(sizes, device="cuda").tolist()
            """,
            note="__init__ runs once",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            result = y.argmax(1).tolist()
        """,
        good="""
            y = torch.tanh(x)
            result = y.argmax(1)
        """,
        description="read predictions with `.tolist()` every step vs keep them on the device",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        if node.args and not (isinstance(node.func, ast.Attribute) and ctx.qualname(node.func)):
            return
        call = ctx.method_call(node, "tolist")
        if call is not None and ctx.maybe_tensor(call[0]):
            ctx.report(node)

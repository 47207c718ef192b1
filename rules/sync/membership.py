from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid


class TensorMembershipTest(Rule):
    """## What it does
    Checks for `v in t` and `v not in t` where `t` is a tensor, in code that runs every
    step.

    ## Why is this bad?
    `Tensor.__contains__` computes `(t == v).any()` on the device and then converts it to a
    Python `bool`: a blocking copy that waits for every kernel queued before it.

    ## Example
    ```python
    for x, y in loader:
        preds = model(x).argmax(1)
        if BACKGROUND in preds:
            images_with_background += 1
    ```

    ## Use instead
    Keep the test on the device and use the result as a tensor:
    ```python
    for x, y in loader:
        preds = model(x).argmax(1)
        images_with_background += (preds == BACKGROUND).any()
    ```
    When a host decision is really needed, make it every N steps, or compute
    `(t == v).any()` and read it together with other values in one copy.

    ## References
    - `Tensor.__contains__` in torch/_tensor.py: `(element == self).any().item()`.
    """

    code = "PFL209"
    name = "tensor-membership-test"
    message = "`{op}` on a tensor reads `(t == v).any()` to the host, waiting for the GPU every step"
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                labels = out.argmax(1)
                if 0 in labels:
                    pass
                missing = 3 not in labels
                seen = [c for c in range(10) if c in labels]
            """,
            count=3,
        ),
        Invalid(
            """
            import torch

            class Head(torch.nn.Module):
                def forward(self, x, pad_id: int):
                    ids = x.argmax(-1)
                    has_pad = pad_id in ids
                    return x, has_pad
            """,
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x, names: list, cache: dict):
                    a = 3 in x.shape
                    b = "key" in names
                    c = x in cache
                    d = x in [None]
                    return x
            """,
            note="shapes, lists, dicts",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                outputs = model(x)
                if "loss" in outputs:
                    loss = outputs["loss"]
                for name in ("aux", "mask"):
                    if name in outputs:
                        pass
            """,
            note="key tests on dict-like model outputs",
        ),
        Valid(
            """
            import numpy as np
            import torch

            for x, y in loader:
                arr = np.arange(3)
                ok = 2 in arr
                host = torch.arange(5)
                ok2 = 2 in host
            """,
            note="numpy arrays and tensors on the CPU",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                out = model(x)
            seen = 0 in out.argmax(1)
            """,
            note="once after the loop",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self, table):
                    super().__init__()
                    self.has_zero = 0 in torch.as_tensor(table, device="cuda")
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
            labels = y.argmax(1)
            result = labels.clamp(max=10) if 3 in labels else labels
        """,
        good="""
            y = torch.tanh(x)
            labels = y.argmax(1)
            result = torch.where((labels == 3).any(), labels.clamp(max=10), labels)
        """,
        description="`v in t` on the host vs a device-side `where`",
    )

    def visit_Compare(self, node: ast.Compare, ctx: RuleContext) -> None:
        left = node.left
        for op, container in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)) and ctx.is_tensor(container) and _tests_values(left, container, ctx):
                ctx.report(node, op="in" if isinstance(op, ast.In) else "not in")
                return
            left = container


def _tests_values(element: ast.expr, container: ast.expr, ctx: RuleContext) -> bool:
    """Is this a value test on a tensor rather than a key test on a dict-like output?

    `"loss" in outputs` only makes sense for dicts (a tensor raises for strings), so a
    string element rules the tensor out. A number or a tensor on the left is a value test;
    any other element needs a container the facts computed with tensor operations (its
    dtype is known), since model outputs are often dict-like `ModelOutput`s.
    """
    if isinstance(element, (ast.JoinedStr, ast.Constant)) and isinstance(getattr(element, "value", ""), (str, bytes)):
        return False
    if isinstance(element, ast.UnaryOp) and isinstance(element.op, ast.USub):
        element = element.operand
    if isinstance(element, ast.Constant) and isinstance(element.value, (int, float, bool)):
        return True
    return ctx.is_tensor(element) or ctx.value(container).dtype is not None

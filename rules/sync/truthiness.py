from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid

from .tensor_assert import tested_by_assert


class TensorTruthiness(Rule):
    """## What it does
    Checks for Python control flow that depends on a tensor's value in code that runs every
    step: `if t:`, `while t:`, `x if t else y`, `t and u`, `t or u`, `not t`, and conditions
    in comprehensions, where `t` is a tensor (for example `(x > 0).any()`,
    `torch.isnan(loss)`, or `mask.sum() > 0`).

    ## Why is this bad?
    Python needs a `bool` to decide which way to go, so `Tensor.__bool__` copies the value to
    the host. That copy waits for every kernel queued before it: the CPU stalls until the GPU
    drains, and the GPU idles while the CPU catches up.

    Conditions of `assert` statements (`assert not t`, `assert t and u`) are reported by
    `tensor-assert` (PFL207).

    Comparisons of shapes or Python numbers (`x.shape[0] > 1`, `x.dim() == 4`,
    `torch.numel(x) > k`) are not tensors and are not reported.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        if torch.isnan(loss):
            continue
        loss.backward()
    ```

    ## Use instead
    Make the decision on the device, or check rarely:
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss = torch.nan_to_num(loss)
        loss.backward()
    ```

    ## Fix safety
    There is no automatic fix. `torch.where(c, a, b)` replaces a conditional expression only
    when both branches are side-effect-free tensor expressions, and it computes both.

    ## References
    - [CUDA semantics: asynchronous execution](https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution)
    - [Performance tuning guide: avoid unnecessary CPU-GPU synchronization](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization)
    """

    code = "PFL206"
    name = "tensor-truthiness"
    message = "`{construct}` on a tensor copies its value to the host and waits for the GPU every step"
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
                if torch.isnan(loss):
                    continue
            """
        ),
        Invalid(
            """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x):
                    while (x.abs() > 1).any():
                        x = x / 2
                    return x
            """
        ),
        Invalid(
            """
            import torch

            class Gate(torch.nn.Module):
                def forward(self, x: torch.Tensor, scale):
                    y = x * 2 if x.mean() > 0 else x
                    ok = not x.isfinite().all()
                    return y
            """,
            count=2,
        ),
        Invalid(
            """
            import torch

            def clip(t):
                best = t.max()
                return t if best > 1 else t * 2

            for batch in loader:
                out = clip(model(batch))
            """,
            note="a tensor flowing into a helper through its parameter",
        ),
        Invalid(
            """
            import torch

            def evaluate(model, loader, device, n):
                hits = []
                for images, labels in loader:
                    out = model(images.to(device))
                    hits.append((out > 0).sum())
                    if sum(hits) > 100:
                        break
                    score = out.max()
                    if score > 0.5:
                        print("high")
            """,
            count=2,
            note="the twin: a sum of tensor counts, and a reduction, are tensors",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x, mask=None):
                    if x.shape[0] > 1 and x.dim() == 4:
                        x = x.flatten(1)
                    if mask is not None:
                        x = x * mask
                    if self.training:
                        x = x * 2
                    if torch.numel(x) > 10:
                        x = x + 1
                    return x
            """,
            note="shapes, None checks and Python attributes are not tensors",
        ),
        Valid(
            """
            import numpy as np

            for x, y in loader:
                a = np.zeros(3)
                if (a > 0).any():
                    pass
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
                assert not torch.isnan(loss)
                assert loss.isfinite() and loss > 0
            """,
            note="assert conditions are tensor-assert's (PFL207) findings",
        ),
        Valid(
            """
            import torch

            best = None
            for epoch in range(10):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                val = evaluate(model)
                if val < 0.5:
                    break
            """,
            note="once per epoch, outside the batch loop",
        ),
        Valid(
            """
            import torch

            def evaluate(model, loader, device, n):
                hits = []
                for images, labels in loader:
                    out = model(images.to(device))
                    hits.append(len(out))
                    if sum(hits) > 100:
                        break
                    assert isinstance(n, int)
                    if n > 2:
                        print(n)
            """,
            note="a sum of `len()` results, and a value after `assert isinstance(n, int)`, are Python numbers",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
            x[torch.rand(size, size, device=device) < 0.0005] = float("nan")
        """,
        bad="""
            y = torch.tanh(x)
            if torch.isnan(y).any():
                y = torch.zeros_like(y)
            result = y
        """,
        good="""
            y = torch.tanh(x)
            y = torch.where(torch.isnan(y).any(), torch.zeros_like(y), y)
            result = y
        """,
        description="branch on `isnan(...).any()` on the host vs select on the device",
    )

    def _check_test(self, test: ast.expr, ctx: RuleContext, construct: str) -> None:
        if isinstance(test, ast.BoolOp):
            for value in test.values:
                self._check_test(value, ctx, construct)
            return
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            self._check_test(test.operand, ctx, construct)
            return
        if ctx.is_tensor(test):
            ctx.report(test, construct=construct)

    def visit_If(self, node: ast.If, ctx: RuleContext) -> None:
        self._check_test(node.test, ctx, "if")

    def visit_While(self, node: ast.While, ctx: RuleContext) -> None:
        self._check_test(node.test, ctx, "while")

    def visit_IfExp(self, node: ast.IfExp, ctx: RuleContext) -> None:
        self._check_test(node.test, ctx, "... if ... else")

    def visit_BoolOp(self, node: ast.BoolOp, ctx: RuleContext) -> None:
        if tested_by_assert(node, ctx):
            return  # `assert t and u` / `assert not t`: tensor-assert (PFL207) reports it
        word = "and" if isinstance(node.op, ast.And) else "or"
        for value in node.values[:-1]:  # the last operand is only returned, not tested
            self._check_test(value, ctx, word)

    def visit_UnaryOp(self, node: ast.UnaryOp, ctx: RuleContext) -> None:
        if isinstance(node.op, ast.Not) and not tested_by_assert(node, ctx):
            self._check_test(node.operand, ctx, "not")

    def visit_comprehension_conditions(self, node: ast.expr, ctx: RuleContext) -> None:
        generators = getattr(node, "generators", [])
        for gen in generators:
            for cond in gen.ifs:
                self._check_test(cond, ctx, "if")

    visit_ListComp = visit_comprehension_conditions
    visit_SetComp = visit_comprehension_conditions
    visit_GeneratorExp = visit_comprehension_conditions
    visit_DictComp = visit_comprehension_conditions

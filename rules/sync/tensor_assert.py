from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability


def assert_condition_parts(test: ast.expr) -> list[ast.expr]:
    """The expressions an `assert` turns into a bool: the test and, through `and` / `or` /
    `not`, each operand. `tensor-truthiness` (PFL206) leaves these to this rule."""
    parts = [test]
    stack = [test]
    while stack:
        node = stack.pop()
        children: list[ast.expr] = []
        if isinstance(node, ast.BoolOp):
            children = list(node.values)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            children = [node.operand]
        parts.extend(children)
        stack.extend(children)
    return parts


def tested_by_assert(node: ast.expr, ctx: RuleContext) -> bool:
    """Is `node` part of the condition of the `assert` statement being walked?"""
    statement = ctx.statement
    return isinstance(statement, ast.Assert) and any(part is node for part in assert_condition_parts(statement.test))


class TensorAssert(Rule):
    """## What it does
    Checks for `assert` statements whose condition is a tensor (`assert (x >= 0).all()`,
    `assert not torch.isnan(loss)`, `assert mask.any() and ok`) in code that runs every
    step.

    Conditions that are Python values are not reported: `assert x.dim() == 4`,
    `assert x.shape == y.shape`, `assert isinstance(x, torch.Tensor)`. `torch.equal` and
    `torch.allclose` return Python bools; they wait for the GPU themselves and are reported
    by their own rule.

    ## Why is this bad?
    `assert` calls `bool()` on the tensor, which copies it to the host and waits until the
    GPU has finished every kernel queued before it: a full pipeline stall, every step, for
    a check that almost never fails.

    ## Example
    ```python
    class Net(torch.nn.Module):
        def forward(self, x):
            assert (x >= 0).all(), "inputs must be non-negative"
            return x.sqrt()
    ```

    ## Use instead
    ```python
    class Net(torch.nn.Module):
        def forward(self, x):
            torch._assert_async((x >= 0).all(), "inputs must be non-negative")
            return x.sqrt()
    ```
    Or check the invariant every N steps, or only in tests.

    ## Fix safety
    The fix rewrites `assert t` / `assert t, "msg"` / `assert not t` into
    `torch._assert_async(t)` / `torch._assert_async(t, "msg")` /
    `torch._assert_async(torch.logical_not(t))`. It is offered only when the whole condition
    is one tensor expression (not an `and` / `or` that mixes Python values), and when the
    message, if any, is a string literal. It is **unsafe**:

    - On CUDA a failure is a device-side assert, raised later at some unrelated call. It
      leaves the CUDA context unusable for the rest of the process and cannot be caught at
      the line that failed.
    - The message is ignored on CUDA; on the CPU the failure is a `RuntimeError` carrying
      the message, not an `AssertionError`.
    - `python -O` strips `assert` statements but not `torch._assert_async`, so the check
      now runs in optimized mode too.

    No fix is offered where the failure is caught (`try: ... except AssertionError:`): there
    failing is ordinary control flow, not a broken invariant.

    Passing checks behave the same: `_assert_async` accepts exactly the single-element
    tensors that `bool()` accepts, and treats them the same way (NaN is true).

    ## References
    - [`torch._assert_async`](https://github.com/pytorch/pytorch/blob/main/torch/_torch_docs.py) ("will trash your CUDA context")
    - [pytorch/pytorch#53086](https://github.com/pytorch/pytorch/pull/53086): `_assert_async` added to avoid the sync of `assert`.
    """

    code = "PFL207"
    name = "tensor-assert"
    message = "`assert` on a tensor copies it to the host and waits for the GPU every step"
    fix_title = "Use `torch._assert_async`"
    fix_availability = FixAvailability.SOMETIMES
    triggers = (b"assert",)
    invalid = [
        Invalid(
            """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x):
                    assert (x >= 0).all(), "negative input"
                    assert not torch.isnan(x).any()
                    assert x.sum()
                    return x
            """,
            count=3,
            fixed="""
            import torch

            class Net(torch.nn.Module):
                def forward(self, x):
                    torch._assert_async((x >= 0).all(), "negative input")
                    torch._assert_async(torch.logical_not(torch.isnan(x).any()))
                    torch._assert_async(x.sum())
                    return x
            """,
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import torch as T

            def check(logits, labels, strict):
                assert (labels >= 0).all() and strict, "bad labels"
                assert T.isfinite(logits).all(), f"non-finite logits {logits.shape}"
                return logits

            for x, y in loader:
                out = check(model(x), y.cuda(), True)
            """,
            count=2,
            fixed="""
            import torch as T

            def check(logits, labels, strict):
                assert (labels >= 0).all() and strict, "bad labels"
                assert T.isfinite(logits).all(), f"non-finite logits {logits.shape}"
                return logits

            for x, y in loader:
                out = check(model(x), y.cuda(), True)
            """,
            unsafe_fixes=True,
            note="no fix when Python values are mixed in or the message is not a literal",
        ),
        Invalid(
            """
            from torch import nn

            class Block(nn.Module):
                def forward(self, x):
                    assert x.abs().max() < 1e3
                    return x
            """,
            fixed="""
            from torch import nn
            import torch

            class Block(nn.Module):
                def forward(self, x):
                    torch._assert_async(x.abs().max() < 1e3)
                    return x
            """,
            unsafe_fixes=True,
            note="`import torch` is added when torch is not imported",
        ),
        Invalid(
            """
            import torch

            class Quant(torch.nn.Module):
                def forward(self, x):
                    assert x.abs().max() < 2**8, (  # overflow check
                        "Error detected in overflow handling: "
                        "`x` exceeds 8 bits"
                    )
                    return x
            """,
            fixed="""
            import torch

            class Quant(torch.nn.Module):
                def forward(self, x):
                    torch._assert_async(x.abs().max() < 2**8, (  # overflow check
                        "Error detected in overflow handling: "
                        "`x` exceeds 8 bits"
                    ))
                    return x
            """,
            unsafe_fixes=True,
            note="a parenthesized multi-line message and its comment are kept",
        ),
        Invalid(
            """
            import torch

            class Robust(torch.nn.Module):
                def forward(self, x):
                    try:
                        assert torch.isfinite(x).all()
                    except AssertionError:
                        x = torch.nan_to_num(x)
                    return x
            """,
            fixed="""
            import torch

            class Robust(torch.nn.Module):
                def forward(self, x):
                    try:
                        assert torch.isfinite(x).all()
                    except AssertionError:
                        x = torch.nan_to_num(x)
                    return x
            """,
            unsafe_fixes=True,
            note="no fix where the AssertionError is caught: failing is control flow there",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x, y):
                    assert x.dim() == 4
                    assert x.shape == y.shape
                    assert isinstance(x, torch.Tensor)
                    assert x.is_cuda and not x.requires_grad
                    assert torch.equal(x, y)
                    assert torch.numel(x) > 0
                    return x
            """,
            note="Python values (torch.equal syncs too, and is reported by its own rule)",
        ),
        Valid(
            """
            import numpy as np

            for x, y in loader:
                a = np.zeros(3)
                assert (a >= 0).all()
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self, table):
                    super().__init__()
                    assert (table >= 0).all()
                    self.table = table

                def forward(self, x):
                    torch._assert_async((x >= 0).all())
                    return x
            """,
            note="__init__ runs once; `_assert_async` does not wait",
        ),
        Valid(
            """
            import torch

            for step, (x, y) in enumerate(loader):
                out = model(x)
                if step % 100 == 0:
                    assert torch.isfinite(out).all()
            assert torch.isfinite(out).all()
            """,
            note="every N steps, and once after the loop",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            assert (y.abs() <= 1).all()
            result = y
        """,
        good="""
            y = torch.tanh(x)
            torch._assert_async((y.abs() <= 1).all())
            result = y
        """,
        description="`assert` on a tensor vs `torch._assert_async`",
    )

    def visit_Assert(self, node: ast.Assert, ctx: RuleContext) -> None:
        if not any(ctx.is_tensor(part) for part in assert_condition_parts(node.test)):
            return
        ctx.report(node.test, fix=self._fix(node, ctx))

    def _fix(self, node: ast.Assert, ctx: RuleContext):
        test = node.test
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        condition = test.operand if isinstance(test, ast.UnaryOp) and negated else test
        if isinstance(condition, (ast.BoolOp, ast.UnaryOp)) or not ctx.is_tensor(condition):
            return None
        if _failure_is_caught(node, ctx):
            return None  # the AssertionError is handled: a device-side assert cannot be
        message = node.msg
        if message is not None and not (isinstance(message, ast.Constant) and isinstance(message.value, str)):
            return None  # a computed message would be built every step (and must be a str)
        alias = ctx.torch_alias()
        imports = [] if alias else ["torch"]
        torch = alias or "torch"
        statement = ctx.text(node)
        if negated:
            rest = statement.replace(ctx.text(condition), "", 1)
            if message is not None:
                rest = rest.replace(ctx.text(message), "", 1)
            if "#" in rest:
                return None  # a comment between the pieces would be lost
            text = f"{torch}.logical_not({ctx.text(condition)})"
            args = text if message is None else f"{text}, {ctx.text(message)}"
        else:
            # Keep everything after `assert` verbatim (parentheses, line breaks, comments):
            # `assert t, (\n "msg"\n)` -> `torch._assert_async(t, (\n "msg"\n))`.
            args = statement[len("assert"):].lstrip(" \t")
        return ctx.fix(
            Applicability.UNSAFE,
            "Replace with `torch._assert_async` (fails asynchronously on CUDA)",
            [ctx.replace(node, f"{torch}._assert_async({args})")],
            imports=imports,
        )


def _failure_is_caught(node: ast.stmt, ctx: RuleContext) -> bool:
    """The assert sits in the body of a `try` whose handler catches `AssertionError` (or
    everything): the failure is part of the control flow, not an invariant."""
    child, current = node, ctx.parent(node)  # type: tuple[ast.AST, ast.AST | None]
    while current is not None and not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if isinstance(current, ast.Try) and any(child is stmt for stmt in current.body):
            for handler in current.handlers:
                kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
                for kind in kinds:
                    name = "" if kind is None else kind.id if isinstance(kind, ast.Name) else \
                        kind.attr if isinstance(kind, ast.Attribute) else "?"
                    if name in ("", "AssertionError", "Exception", "BaseException"):
                        return True
        child, current = current, ctx.parent(current)
    return False

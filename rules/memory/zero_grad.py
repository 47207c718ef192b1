from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.values import Kind
from perflint.rewrite import RewriteError, cst, remove_keyword
from perflint.rule import Benchmark, FixPlan, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

_RECEIVERS = (Kind.OPTIMIZER, Kind.MODULE, Kind.UNKNOWN)


def _grad_of(node: ast.expr) -> ast.expr | None:
    """`p` for `p.grad` and `p.grad.data`."""
    if isinstance(node, ast.Attribute) and node.attr == "data":
        node = node.value
    if isinstance(node, ast.Attribute) and node.attr == "grad":
        return node.value
    return None


class ZeroGradSetToNoneFalse(Rule):
    """## What it does
    Checks for `optimizer.zero_grad(set_to_none=False)`, `model.zero_grad(set_to_none=False)`
    and `p.grad.zero_()` in code that runs every step.

    ## Why is this bad?
    Zeroing gradients in place launches a memset kernel per parameter every step, and the
    next backward pass then adds into the zeroed buffers instead of writing them. Setting
    them to `None` (the default of `zero_grad()` since PyTorch 2.0) costs nothing, lets
    backward write the gradient directly, and frees the gradient memory between the
    optimizer step and the next backward.

    ## Example
    ```python
    for x, y in loader:
        optimizer.zero_grad(set_to_none=False)
        criterion(model(x), y).backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    ```

    ## Fix safety
    The fix drops `set_to_none=False` (and turns `p.grad.zero_()` into `p.grad = None`). It
    is **unsafe**: a parameter that gets no gradient in the next backward pass (a frozen
    branch, an unused embedding row's module, a conditional layer) keeps `grad = None`
    instead of a zero tensor, and optimizers *skip* parameters whose gradient is `None`, so
    it gets no momentum or weight-decay update where it used to get one. Code that reads
    `.grad` before the next backward sees `None` instead of zeros.

    ## References
    - [`Optimizer.zero_grad`](https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html): "This will in general have lower memory footprint, and can modestly improve performance. However, it changes certain behaviors."
    """

    code = "PFL301"
    name = "zero-grad-set-to-none-false"
    message = "`{call}` zeroes gradients in place every step; `zero_grad()` sets them to None for free"
    family = "memory"
    fix_availability = FixAvailability.SOMETIMES
    triggers = (b"zero_grad", b".zero_(")
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                optimizer.zero_grad(set_to_none=False)
                model.zero_grad(False)
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
            count=2,
            fixed="""
            import torch

            for x, y in loader:
                optimizer.zero_grad()
                model.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import torch

            def clear(model):
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad.zero_()

            for x, y in loader:
                clear(model)
                criterion(model(x), y).backward()
                optimizer.step()
            """,
            fixed="""
            import torch

            def clear(model):
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad = None

            for x, y in loader:
                clear(model)
                criterion(model(x), y).backward()
                optimizer.step()
            """,
            unsafe_fixes=True,
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                optimizer.zero_grad()
                optimizer.zero_grad(set_to_none=True)
                criterion(model(x), y).backward()
                optimizer.step()
            """,
        ),
        Valid(
            """
            import torch

            optimizer.zero_grad(set_to_none=False)
            for x, y in loader:
                buf = x.clone()
                buf.zero_()
                criterion(model(x), y).backward()
            """,
            note="once before the loop; zeroing a tensor that is not a gradient",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            torch.manual_seed(0)
            model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(16)]).to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            x = torch.randn(32, 256, device=device)
            start = [p.detach().clone() for p in model.parameters()]
        """,
        bad="""
            with torch.no_grad():
                for p, s in zip(model.parameters(), start):
                    p.copy_(s)
            optimizer.zero_grad(set_to_none=False)
            model(x).square().mean().backward()
            optimizer.step()
            result = torch.cat([p.detach().flatten() for p in model.parameters()])
        """,
        good="""
            with torch.no_grad():
                for p, s in zip(model.parameters(), start):
                    p.copy_(s)
            optimizer.zero_grad()
            model(x).square().mean().backward()
            optimizer.step()
            result = torch.cat([p.detach().flatten() for p in model.parameters()])
        """,
        description="one SGD step after `zero_grad(set_to_none=False)` vs `zero_grad()`",
        claim="time",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        method = ctx.method_call(node, "zero_grad", "zero_")
        if method is None:
            return
        receiver, name = method
        if name == "zero_":
            param = _grad_of(receiver)
            if param is not None and not node.args and not node.keywords and ctx.maybe_tensor(param):
                ctx.report(node, call=f"{ctx.text(receiver)}.zero_()", fix=self._grad_fix(node, receiver, ctx))
            return
        if ctx.value(receiver).kind not in _RECEIVERS:
            return
        if receiver is not getattr(node.func, "value", None):
            return  # the unbound `Optimizer.zero_grad(opt, ...)` form is not worth a special case
        flag = None
        for kw in node.keywords:
            if kw.arg == "set_to_none":
                flag = kw.value
        if flag is None and len(node.args) == 1:
            flag = node.args[0]
        if not (isinstance(flag, ast.Constant) and flag.value is False):
            return
        ctx.report(node, call=f"{ctx.text(receiver)}.zero_grad(set_to_none=False)", fix=self._fix(node, ctx))

    @staticmethod
    def _fix(node: ast.Call, ctx: RuleContext) -> FixPlan | None:
        def transform(expr: cst.BaseExpression) -> cst.BaseExpression:
            assert isinstance(expr, cst.Call)
            if expr.args and expr.args[0].keyword is None:
                return expr.with_changes(args=[])
            return remove_keyword(expr, "set_to_none")

        try:
            edit = ctx.rewrite(node, transform)
        except (RewriteError, cst.ParserSyntaxError):
            return None
        return ctx.fix(Applicability.UNSAFE, "Use `zero_grad()`, which sets gradients to None", [edit])

    @staticmethod
    def _grad_fix(node: ast.Call, receiver: ast.expr, ctx: RuleContext) -> FixPlan | None:
        statement = ctx.statement
        if not (isinstance(statement, ast.Expr) and statement.value is node):
            return None
        grad = receiver.value if isinstance(receiver, ast.Attribute) and receiver.attr == "data" else receiver
        return ctx.fix(Applicability.UNSAFE, "Set the gradient to None",
                       [ctx.replace(statement, f"{ctx.text(grad)} = None")])

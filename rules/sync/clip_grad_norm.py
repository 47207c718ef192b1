from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rewrite import RewriteError, remove_keyword
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import argument, literal

# function -> position of `error_if_nonfinite`
_FUNCTIONS = {
    "torch.nn.utils.clip_grad_norm_": 3,
    "torch.nn.utils.clip_grad_norm": 3,
    "torch.nn.utils.clip_grad.clip_grad_norm_": 3,
    "torch.nn.utils.clip_grad.clip_grad_norm": 3,
    "torch.nn.utils.get_total_norm": 2,
    "torch.nn.utils.clip_grad.get_total_norm": 2,
}


class ClipGradNormErrorIfNonfinite(Rule):
    """## What it does
    Checks for `torch.nn.utils.clip_grad_norm_(..., error_if_nonfinite=True)` (and
    `get_total_norm(..., error_if_nonfinite=True)`) in code that runs every step. The default,
    `False`, does not sync.

    ## Why is this bad?
    To decide whether to raise, `clip_grad_norm_` evaluates
    `torch.logical_or(total_norm.isnan(), total_norm.isinf())` in an `if`: the flag is read
    to the host, which waits for the backward pass and every other queued kernel.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        optimizer.step()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        torch._assert_async(torch.isfinite(norm))  # optional: a device-side check
        optimizer.step()
    ```

    ## Fix safety
    The fix removes `error_if_nonfinite=True` (or turns a positional `True` into `False`).
    With finite gradients the returned norm and the clipped gradients are the same. It is
    unsafe because a NaN or infinite norm no longer raises: the gradients are scaled by a
    non-finite factor and the step goes ahead. Add a check of your own (every N steps, or
    `torch._assert_async`) if you rely on the error.

    ## References
    - `clip_grad_norm_` / `get_total_norm` in torch/nn/utils/clip_grad.py:
      `if error_if_nonfinite and torch.logical_or(total_norm.isnan(), total_norm.isinf()):`.
    """

    code = "PFL224"
    name = "clip-grad-norm-error-if-nonfinite"
    message = "`error_if_nonfinite=True` reads the gradient norm to the host and waits for the GPU every step"
    triggers = (b"error_if_nonfinite",)
    fix_availability = FixAvailability.ALWAYS
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
                optimizer.step()
            """,
            fixed="""
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            """,
            unsafe_fixes=True,
        ),
        Invalid(
            """
            from torch import nn
            from torch.nn.utils import clip_grad_norm_, get_total_norm

            def train_step(model, batch, optimizer):
                model(batch).sum().backward()
                clip_grad_norm_(model.parameters(), 1.0, 2.0, True)
                n = get_total_norm([p.grad for p in model.parameters()], error_if_nonfinite=True, foreach=True)
                nn.utils.clip_grad_norm_(
                    model.parameters(),
                    max_norm=5.0,
                    error_if_nonfinite=True,
                )
                optimizer.step()

            for batch in loader:
                train_step(model, batch, optimizer)
            """,
            count=3,
            fixed="""
            from torch import nn
            from torch.nn.utils import clip_grad_norm_, get_total_norm

            def train_step(model, batch, optimizer):
                model(batch).sum().backward()
                clip_grad_norm_(model.parameters(), 1.0, 2.0, False)
                n = get_total_norm([p.grad for p in model.parameters()], foreach=True)
                nn.utils.clip_grad_norm_(
                    model.parameters(),
                    max_norm=5.0,
                )
                optimizer.step()

            for batch in loader:
                train_step(model, batch, optimizer)
            """,
            unsafe_fixes=True,
            note="positional, keyword, multi-line, and `get_total_norm`",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=False)
                optimizer.step()
            """,
            note="the default does not sync",
        ),
        Valid(
            """
            import torch

            def check(model):
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)

            check(model)
            """,
            note="once, outside the training loop",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            model = torch.nn.Sequential(*[torch.nn.Linear(size, size) for _ in range(4)]).to(device)
            x = torch.randn(256, size, device=device)
        """,
        bad="""
            model.zero_grad()
            model(x).square().mean().backward()
            result = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        """,
        good="""
            model.zero_grad()
            model(x).square().mean().backward()
            result = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        """,
        description="`clip_grad_norm_` with vs without `error_if_nonfinite=True`",
        compare="close",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        position = _FUNCTIONS.get(ctx.call_name(node) or "")
        if position is None:
            return
        flag = argument(node, position, "error_if_nonfinite")
        if flag is None or literal(flag) is not True:
            return
        keyword = next((kw for kw in node.keywords if kw.value is flag), None)
        if keyword is None:
            edit = ctx.replace(flag, "False")
        else:
            try:
                edit = ctx.rewrite(node, lambda call: remove_keyword(call, "error_if_nonfinite"))
            except RewriteError:
                edit = None
        fix = None
        if edit is not None:
            fix = ctx.fix(Applicability.UNSAFE, "Remove `error_if_nonfinite=True` (a non-finite norm no longer raises)",
                          [edit])
        ctx.report(flag if keyword is None else keyword, fix=fix)

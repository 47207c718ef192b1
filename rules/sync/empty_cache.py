from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import statement_line_bounds

_FUNCTIONS = frozenset({
    "torch.cuda.empty_cache", "torch.cuda.memory.empty_cache", "torch.accelerator.empty_cache",
    "torch.accelerator.memory.empty_cache", "torch.xpu.empty_cache", "torch.mps.empty_cache",
})
_BLOCKS = ("body", "orelse", "finalbody")


class EmptyCacheInLoop(Rule):
    """## What it does
    Checks for `torch.cuda.empty_cache()` (and the `torch.accelerator`, `xpu` and `mps`
    versions) in code that runs every step.

    ## Why is this bad?
    `empty_cache()` synchronizes the device and then returns every cached, unused block to
    the driver with `cudaFree`, which is itself synchronous. The next step has to get that
    memory back with `cudaMalloc`: the caching allocator exists to avoid exactly those calls.
    It does not make more memory available to PyTorch, only to other processes.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        torch.cuda.empty_cache()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```
    To fight fragmentation, set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` instead.

    ## Fix safety
    The fix deletes the statement: it changes no result, only how much memory the process
    keeps cached (visible to other processes sharing the GPU, and to `nvidia-smi`). When the
    call is the only statement of its block it becomes `pass`. A comment on the same line
    goes with it; comments on other lines stay. No fix is offered when the call is part of a
    larger expression or shares its line with another statement (`a; torch.cuda.empty_cache()`).

    ## References
    - `release_cached_blocks` in c10/cuda/CUDACachingAllocator.cpp: `synchronize_and_free_events`,
      then `cudaFree` for every cached block.
    - [CUDA semantics: memory management](https://pytorch.org/docs/stable/notes/cuda.html#memory-management)
    """

    code = "PFL226"
    name = "empty-cache-in-loop"
    message = "`{call}` synchronizes and frees the allocator cache every step"
    triggers = (b"empty_cache",)
    fix_availability = FixAvailability.SOMETIMES
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
                # free memory between steps
                torch.cuda.empty_cache()  # frees the cache
                loss.backward()
                if loss > 10:
                    torch.cuda.empty_cache()
            """,
            count=2,
            fixed="""
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
                # free memory between steps
                loss.backward()
                if loss > 10:
                    pass
            """,
        ),
        Invalid(
            """
            import torch as T
            from torch.cuda import empty_cache

            class Net(T.nn.Module):
                def forward(self, x):
                    y = x * 2; empty_cache()
                    for _ in range(2): T.cuda.empty_cache()
                    return y, T.cuda.empty_cache()
            """,
            count=3,
            fixed="""
            import torch as T
            from torch.cuda import empty_cache

            class Net(T.nn.Module):
                def forward(self, x):
                    y = x * 2; empty_cache()
                    for _ in range(2): pass
                    return y, T.cuda.empty_cache()
            """,
            note="aliases; no fix on a shared line or inside an expression",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for epoch in range(10):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                torch.cuda.empty_cache()
            """,
            note="once per epoch, outside the batch loop",
        ),
        Valid(
            """
            import torch

            def evaluate(model):
                torch.cuda.empty_cache()

            evaluate(model)
            """,
            note="not in the training loop",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            scratch = torch.empty(16 * size, size, device=device)  # a step's temporary
            del scratch
            torch.cuda.empty_cache()
            result = y
        """,
        good="""
            y = torch.tanh(x)
            scratch = torch.empty(16 * size, size, device=device)
            del scratch
            result = y
        """,
        description="`torch.cuda.empty_cache()` every step vs never",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name not in _FUNCTIONS:
            return
        ctx.report(node, fix=_delete(node, ctx), call=f"{name}()")


def _delete(node: ast.Call, ctx: RuleContext):
    statement = ctx.parent(node)
    if not isinstance(statement, ast.Expr) or node.args or node.keywords:
        return None
    block = _enclosing_block(statement, ctx)
    if block is None:
        return None
    if len(block) == 1:
        edit = ctx.replace(statement, "pass")
    else:
        bounds = statement_line_bounds(ctx, statement)
        if bounds is None:
            return None
        edit = (bounds[0], bounds[1], "")
    return ctx.fix(Applicability.SAFE, "Remove the call", [edit])


def _enclosing_block(statement: ast.stmt, ctx: RuleContext) -> list[ast.stmt] | None:
    owner = ctx.parent(statement)
    for field in _BLOCKS:
        block = getattr(owner, field, None)
        if isinstance(block, list) and any(s is statement for s in block):
            return block
    return None

from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid

from ._constants import FILL_FACTORIES, constant_call, scratch_buffer, torch_factory, trivial


class ConstantFillInHotPath(Rule):
    """## What it does
    Checks for tensors filled from constants in code that runs every step:
    `torch.arange(10, device=x.device)`, `torch.ones(3, 3)`, `torch.eye(4)`,
    `torch.full((2,), 0.5)`, `torch.linspace(0, 1, 5)`, where every argument is a literal (a
    `device=` and a `dtype=` may be any expression).

    Not enabled by default (select it with `--extend-select PFL108`): these cost an
    allocation and a small kernel per step, not a host-device synchronization, and are
    worth hoisting only in steps short enough for launch overhead to matter (small models,
    CUDA graphs). Constants copied from the host (`torch.tensor([...])`) are PFL106's.

    ## Why is this bad?
    The same tensor is rebuilt on every step: an allocation from the caching allocator and
    a fill kernel, each time, for a value that never changes. Built once, it costs nothing
    per step.

    ## Example
    ```python
    import torch

    class Attention(torch.nn.Module):
        def forward(self, x):
            mask = torch.ones(64, 64, device=x.device).triu(1).bool()
            return x.masked_fill(mask, float("-inf"))
    ```

    ## Use instead
    ```python
    import torch

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mask", torch.ones(64, 64).triu(1).bool(), persistent=False)

        def forward(self, x):
            return x.masked_fill(self.mask, float("-inf"))
    ```

    ## Fix safety
    There is no automatic fix: hoisting the tensor means choosing where it lives (a buffer,
    a module attribute, a global) and on which device, and a tensor that the code later
    modifies in place must not be shared between steps.

    ## References
    - [`Module.register_buffer`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.register_buffer)
    """

    code = "PFL108"
    name = "constant-fill-in-hot-path"
    message = "`{call}()` fills the same constant tensor every step; build it once (a buffer or a module attribute)"
    family = "data"
    default_enabled = False
    triggers = (b"torch",)
    invalid = [
        Invalid(
            """
            import torch

            class Head(torch.nn.Module):
                def forward(self, x):
                    idx = torch.arange(8, device=x.device)
                    eye = torch.eye(3, device=x.device)
                    grid = torch.linspace(0, 1, 5)
                    return x, idx, eye, grid
            """,
            count=3,
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            class Head(torch.nn.Module):
                def forward(self, x, mask):
                    n = x.shape[0]
                    idx = torch.arange(n, device=x.device)
                    zero = torch.full((), 0.0, device=x.device)
                    none = torch.zeros(0, 4, device=x.device)
                    acc = torch.zeros(3, device=x.device)
                    acc += x.sum()
                    return idx, torch.where(mask, zero, x), none, acc
            """,
            note="shapes from data, 0-dim and empty tensors, a buffer written in place",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, 64, device=device)
            mask = torch.ones(64, 64, device=device).triu(1).bool()
        """,
        bad="""
            result = x @ torch.ones(64, 64, device=device).triu(1).bool().float()
        """,
        good="""
            result = x @ mask.float()
        """,
        description="a triangular mask filled every step vs one built once",
        claim="time",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        factory = torch_factory(node, ctx, FILL_FACTORIES)
        if factory is None or not constant_call(node, ctx) or trivial(node, factory):
            return
        if not scratch_buffer(node, ctx):
            ctx.report(node, call=ctx.text(node.func))

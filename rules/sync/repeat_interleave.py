from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.values import Kind
from perflint.rewrite import RewriteError, add_keyword
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import argument, literal, opaque_arguments

_PLACEHOLDER = "OUTPUT_SIZE"


class RepeatInterleaveWithoutOutputSize(Rule):
    """## What it does
    Checks for `torch.repeat_interleave(x, repeats)`, `x.repeat_interleave(repeats)` and
    `torch.repeat_interleave(repeats)` where `repeats` is a tensor and `output_size` is not
    given, in code that runs every step. Integer repeats are fine.

    ## Why is this bad?
    The length of the result is the sum of the repeats, which only the GPU knows. PyTorch
    computes `cumsum(repeats)` on the device and reads its last element (and checks that no
    repeat is negative) with `.item()`: the CPU waits for every queued kernel. With
    `output_size=` the length is known on the host and there is no sync.

    ## Example
    ```python
    for tokens, counts in loader:
        expert_ids = torch.arange(8, device=counts.device)
        routed = expert_ids.repeat_interleave(counts.cuda())
    ```

    ## Use instead
    Pass the total when the host knows it (here every sample has exactly `TOP_K` entries):
    ```python
    for tokens, counts in loader:
        expert_ids = torch.arange(8, device=counts.device)
        routed = expert_ids.repeat_interleave(counts.cuda(), output_size=tokens.shape[0] * TOP_K)
    ```

    ## Fix safety
    The suggested fix adds `output_size=` with a placeholder and is display-only: only the
    author knows the host-side total. It must equal `repeats.sum()` (times the size of the
    repeated dimension for a single repeat value); on the CPU a wrong value raises
    "allocated size does not match required size".

    ## References
    - [`torch.repeat_interleave`](https://pytorch.org/docs/stable/generated/torch.repeat_interleave.html): "output_size … If given, it will avoid stream synchronization needed to calculate output shape of the tensor."
    - `repeat_interleave_common` in aten/src/ATen/native/Repeat.h reads `cumsum[-1].item()`.
    """

    code = "PFL216"
    name = "repeat-interleave-without-output-size"
    message = "`repeat_interleave` with tensor repeats reads their total to the host and waits for the GPU every step"
    triggers = (b"repeat_interleave",)
    fix_availability = FixAvailability.SOMETIMES
    invalid = [
        Invalid(
            """
            import torch

            for x, lengths in loader:
                counts = lengths.cuda()
                a = torch.repeat_interleave(x, counts, dim=0)
                b = x.repeat_interleave(counts)
                c = torch.repeat_interleave(counts)
            """,
            count=3,
        ),
        Invalid(
            """
            import torch as T
            from torch import repeat_interleave as ri

            class Router(T.nn.Module):
                def forward(self, x, scores):
                    counts = T.bincount(scores.argmax(-1), minlength=8)
                    y = ri(x, repeats=counts, dim=0)
                    return T.Tensor.repeat_interleave(x, counts, dim=0, output_size=None)
            """,
            count=2,
            note="aliases, the unbound method, an explicit `output_size=None`",
        ),
        Invalid(
            """
            import torch

            for x, lengths in loader:
                counts = lengths.cuda()
                y = torch.repeat_interleave(x, counts, dim=0)
            """,
            fixed="""
            import torch

            for x, lengths in loader:
                counts = lengths.cuda()
                y = torch.repeat_interleave(x, counts, dim=0)
            """,
            unsafe_fixes=True,
            note="the fix is display-only: never applied",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                a = x.repeat_interleave(2, dim=0)
                b = torch.repeat_interleave(x, 3)
            """,
            note="integer repeats do not sync",
        ),
        Valid(
            """
            import torch

            for x, lengths in loader:
                counts = lengths.cuda()
                y = torch.repeat_interleave(x, counts, dim=0, output_size=x.shape[0] * 4)
            """,
            note="output_size given",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                r = torch.tensor([1, 2, 3])
                z = torch.repeat_interleave(r)
            """,
            note="CPU repeats in the one-argument form",
        ),
        Valid(
            """
            import numpy as np

            for x, y in loader:
                z = np.repeat(np.arange(3), np.array([1, 2, 3]))
            """,
            note="numpy",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
            rows = torch.randn(4096, 64, device=device)
            counts = torch.full((4096,), 2, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            result = torch.repeat_interleave(rows + y[0, 0], counts, dim=0)
        """,
        good="""
            y = torch.tanh(x)
            result = torch.repeat_interleave(rows + y[0, 0], counts, dim=0, output_size=8192)
        """,
        description="`repeat_interleave` with tensor repeats, without vs with `output_size`",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        source: ast.expr | None
        repeats: ast.expr | None
        if name == "torch.repeat_interleave":
            if argument(node, 1, "repeats") is None and len(node.args) == 1:
                source, repeats = None, node.args[0]  # repeat_interleave(repeats)
            else:
                source, repeats = argument(node, 0, "input"), argument(node, 1, "repeats")
        else:
            method = ctx.method_call(node, "repeat_interleave")
            if method is None:
                return
            offset = 1 if name == "torch.Tensor.repeat_interleave" else 0
            source, repeats = method[0], argument(node, offset, "repeats")
        if repeats is None or opaque_arguments(node):
            return
        output_size = next((kw for kw in node.keywords if kw.arg == "output_size"), None)
        if output_size is not None and literal(output_size.value) is not None:
            return
        repeats_value = ctx.value(repeats)
        if repeats_value.kind not in (Kind.TENSOR, Kind.BATCH):
            return  # a Python int or list: no sync
        if repeats_value.on_cpu and (source is None or ctx.value(source).on_cpu):
            return
        ctx.report(node, fix=_suggest_output_size(node, output_size, ctx))


def _suggest_output_size(node: ast.Call, output_size: ast.keyword | None, ctx: RuleContext):
    if output_size is not None:
        edit = ctx.replace(output_size.value, _PLACEHOLDER)
    else:
        try:
            edit = ctx.rewrite(node, lambda call: add_keyword(call, "output_size", _PLACEHOLDER))
        except RewriteError:
            return None
    return ctx.fix(
        Applicability.DISPLAY_ONLY,
        "Pass `output_size=` with the total number of repeated elements, known on the host",
        [edit],
    )

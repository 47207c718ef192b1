from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid

from ._support import argument, device_input, literal, opaque_arguments


class MultinomialSync(Rule):
    """## What it does
    Checks for `torch.multinomial(p, n)` and `p.multinomial(n)` in code that runs every step
    when they sample without replacement (`replacement=False`, the default) or draw a single
    sample (`num_samples=1`). **Off by default** (select `PFL219` to enable it): on current
    PyTorch these calls do not synchronize.

    ## Why is this bad?
    On those paths PyTorch validates the probabilities first (`max() < inf`, `min() >= 0`,
    no row summing to zero). Releases that read those checks on the host with `.item()` wait
    for every queued kernel. Measured with `perflint bench` on an H100 with torch 2.11
    (2026-11-25): no synchronization at all (`set_sync_debug_mode("error")` stays silent and
    the profiler shows no waiting CUDA call), because the checks are device-side asserts; the
    sampling still costs extra kernels, and the bench pair's step took 2.2x as long as the
    exponential trick below. That is a time cost, not a stall, hence opt-in.

    ## Example
    ```python
    for x, y in loader:
        probs = model(x).softmax(-1)
        next_token = torch.multinomial(probs, num_samples=1)
    ```

    ## Use instead
    Sample with the exponential (Gumbel-max) trick, which PyTorch itself uses for one
    sample, in fewer kernels:
    ```python
    for x, y in loader:
        probs = model(x).softmax(-1)
        next_token = torch.argmax(probs / torch.empty_like(probs).exponential_(), -1, keepdim=True)
    ```

    ## Fix safety
    There is no automatic fix. The exponential trick samples from the same distribution but
    draws different numbers and skips the validity checks.

    ## References
    - `multinomial_out` in aten/src/ATen/native/Distributions.cpp: "Fast-path for no
      replacement or if only one sample is drawn", preceded by the validity checks.
    - docs/benchmarks.md: the H100 run (proof: no sync in either form).
    """

    code = "PFL219"
    name = "multinomial-sync"
    message = "`{call}` {why} validates the probabilities every step (extra kernels; a host read on older PyTorch)"
    default_enabled = False
    triggers = (b"multinomial",)
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                probs = model(x).softmax(-1)
                a = torch.multinomial(probs, 4)
                b = probs.multinomial(1, replacement=True)
                c = torch.multinomial(probs, num_samples=8, replacement=False)
            """,
            count=3,
        ),
        Invalid(
            """
            import torch as T
            from torch import multinomial as mn

            class Sampler(T.nn.Module):
                def forward(self, logits):
                    p = logits.softmax(-1)
                    return mn(p, 2), T.Tensor.multinomial(p, 1, True)
            """,
            count=2,
            note="aliases and the unbound method",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                probs = model(x).softmax(-1)
                a = torch.multinomial(probs, 16, replacement=True)
                b = probs.multinomial(4, True)
            """,
            note="with replacement and more than one sample: no host read",
        ),
        Valid(
            """
            import numpy as np

            rng = np.random.default_rng(0)
            for x, y in loader:
                counts = np.random.multinomial(10, [0.5, 0.5])
                more = rng.multinomial(10, [0.5, 0.5])
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            class Sampler(torch.nn.Module):
                def __init__(self, weights):
                    super().__init__()
                    self.order = torch.multinomial(weights, len(weights))
            """,
            note="once, at construction",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
            probs = torch.rand(256, 1000, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            result = torch.multinomial(probs + y[0, 0].abs(), 1)
        """,
        good="""
            y = torch.tanh(x)
            p = probs + y[0, 0].abs()
            result = torch.argmax(p / torch.empty_like(p).exponential_(), -1, keepdim=True)
        """,
        description="one sample with `torch.multinomial` vs the exponential trick on the device",
        equal_results=False,  # same distribution, different draws
        claim="time",  # no sync on torch 2.11 with CUDA (measured on an H100)
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name == "torch.multinomial":
            source, offset, label = argument(node, 0, "input"), 1, "torch.multinomial()"
            if source is not None and not device_input(ctx, source):
                return
        else:
            method = ctx.method_call(node, "multinomial")
            if method is None or not device_input(ctx, method[0]):
                return
            offset = 1 if name == "torch.Tensor.multinomial" else 0
            label = "Tensor.multinomial()"
        if opaque_arguments(node):
            return
        samples = literal(argument(node, offset, "num_samples"))
        replacement_node = argument(node, offset + 1, "replacement")
        replacement = False if replacement_node is None else literal(replacement_node)
        if samples == 1 and not isinstance(samples, bool):
            ctx.report(node, call=label, why="with one sample")
        elif replacement is False:
            ctx.report(node, call=label, why="without replacement")

from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.values import NORMAL_DISTRIBUTION, Kind
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import argument, bind_once, is_simple, only_parameters, operand_text, torch_prefix


class NormalWithTensorStd(Rule):
    """## What it does
    Checks for `torch.normal(mean, std)` where `std` is a tensor, in code that runs every
    step, and for `dist.sample()` of a `torch.distributions` `Normal` (`LogNormal`,
    `HalfNormal`, or `Independent` over one) made from tensors.

    ## Why is this bad?
    PyTorch checks that every standard deviation is non-negative with
    `std.min().ge(0).item()` before sampling: a read to the host that waits for every queued
    kernel. The PyTorch docs: "When std is a CUDA tensor, this function synchronizes its
    device with the CPU." A Python-number `std` is checked on the host and does not sync.
    `Normal.sample()` is `torch.normal(loc, scale)`, and the constructor turns a number `scale`
    into a tensor beside `loc`, so it syncs even with `validate_args=False` (measured on an
    H200, torch 2.11: `set_sync_debug_mode("error")` raises in `normal.py`; `rsample()` does
    not). A Normal made only from numbers or CPU tensors samples on the CPU and is not reported.

    ## Example
    ```python
    for x, y in loader:
        mu, sigma = model(x)
        z = torch.normal(mu, sigma)
    ```

    ## Use instead
    ```python
    for x, y in loader:
        mu, sigma = model(x)
        z = (mu + sigma * torch.randn_like(mu)).detach()
    ```

    ## Fix safety
    The fix samples a standard normal and scales it, as `torch.normal` does internally:
    `(mean + std * torch.randn_like(mean)).detach()` for a tensor `mean`, and
    `(mean + std * torch.randn_like(std)).detach()` for a number. With the same generator
    state it draws the very same numbers (on the CPU the results are bit-identical). It is
    unsafe because:

    - a negative or NaN `std` no longer raises;
    - `torch.normal` broadcasts `mean` and `std` and draws one number per output element; the
      fix draws `mean.shape` numbers, so when `std` has more elements than a tensor `mean`
      the draws are reused along the broadcast dimensions;
    - `torch.normal` returns `mean`'s dtype, the fix promotes (a `float32` mean with a
      `float64` std gives `float64`).

    `.detach()` keeps autograd as it was: `torch.normal` passes zero gradients to `mean` and
    `std`, while `mean + std * noise` would pass real ones (the reparameterisation trick).
    A parameter whose only use is this call gets `.grad` `None` instead of zeros.
    No fix is offered with `generator=`, `size`, `out=`, or when `mean` is neither a known
    tensor nor a number.

    `dist.sample(shape)` becomes `dist.rsample(shape).detach()`: `rsample` draws the standard
    normal and computes `loc + eps * scale`, the same arithmetic, so with the same generator
    state the numbers are the same (bit-identical on the CPU, for `LogNormal`, `HalfNormal`
    and `Independent` too), with the same shape and dtype and no gradient. It is unsafe
    because with `validate_args=False` a negative or NaN scale no longer raises.

    ## References
    - [`torch.normal`](https://pytorch.org/docs/stable/generated/torch.normal.html): "When std is a CUDA tensor, this function synchronizes its device with the CPU."
    - `Normal.sample` and `Normal.rsample` in torch/distributions/normal.py; `broadcast_all` in
      torch/distributions/utils.py.
    """

    code = "PFL223"
    name = "normal-with-tensor-std"
    message = "`torch.normal` with a tensor `std` checks it on the host and waits for the GPU every step"
    sample_message = ("`{call}()` calls `torch.normal` with the distribution's tensor scale, which it checks on the "
                      "host: it waits for the GPU every step; `rsample().detach()` draws the same numbers")
    triggers = (b"normal", b"Normal")
    fix_availability = FixAvailability.SOMETIMES
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                scale = out.abs()
                a = torch.normal(out, scale)
                b = torch.normal(0.0, scale)
                c = torch.normal(mean=out, std=out.abs() + 1e-3)
                d = torch.normal(out, scale, generator=gen)
            """,
            count=4,
            fixed="""
            import torch

            for x, y in loader:
                out = model(x)
                scale = out.abs()
                a = (out + scale * torch.randn_like(out)).detach()
                b = (0.0 + scale * torch.randn_like(scale)).detach()
                c = (out + (out.abs() + 1e-3) * torch.randn_like(out)).detach()
                d = torch.normal(out, scale, generator=gen)
            """,
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import torch as T
            from torch import normal

            class Noise(T.nn.Module):
                def forward(self, x):
                    return normal(x.mean(-1), x.std(-1)) * 2
            """,
            fixed="""
            import torch as T
            from torch import normal

            class Noise(T.nn.Module):
                def forward(self, x):
                    return (lambda m: (m + x.std(-1) * T.randn_like(m)).detach())(x.mean(-1)) * 2
            """,
            unsafe_fixes=True,
            note="an operand that is not a plain name is evaluated once",
        ),
        Invalid(
            """
            import torch
            from torch.distributions import Independent, Normal

            class GaussianPolicy(torch.nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.head = torch.nn.Linear(n, n)
                    self.log_std = torch.nn.Parameter(torch.zeros(n))

                def forward(self, obs):
                    mu = self.head(obs)
                    dist = Normal(mu, self.log_std.exp(), validate_args=False)
                    action = dist.sample()
                    noise = Independent(Normal(mu, 0.1, validate_args=False), 1).sample((2,))
                    return action, noise, dist.log_prob(action)
            """,
            count=2,
            fixed="""
            import torch
            from torch.distributions import Independent, Normal

            class GaussianPolicy(torch.nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.head = torch.nn.Linear(n, n)
                    self.log_std = torch.nn.Parameter(torch.zeros(n))

                def forward(self, obs):
                    mu = self.head(obs)
                    dist = Normal(mu, self.log_std.exp(), validate_args=False)
                    action = dist.rsample().detach()
                    noise = Independent(Normal(mu, 0.1, validate_args=False), 1).rsample((2,)).detach()
                    return action, noise, dist.log_prob(action)
            """,
            unsafe_fixes=True,
            note="`Normal(...).sample()` is `torch.normal(loc, scale)`; a number scale becomes a tensor",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                a = torch.normal(out, 0.1)
                b = torch.normal(0.0, 1.0, size=(3,))
                c = torch.randn_like(out) * 0.1
            """,
            note="a Python-number std is checked on the host",
        ),
        Valid(
            """
            import numpy as np

            for x, y in loader:
                noise = np.random.normal(0.0, np.ones(3))
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                s = torch.ones(3)
                z = torch.normal(torch.zeros(3), s)
            """,
            note="CPU tensors",
        ),
        Valid(
            """
            import torch
            from torch.distributions import Categorical, Normal

            for x, y in loader:
                mu = model(x.cuda())
                prior = Normal(0.0, 1.0).sample((4,))
                host = Normal(torch.zeros(3), torch.ones(3)).sample()
                z = Normal(mu, 0.5, validate_args=False).rsample()
                a = Categorical(logits=mu, validate_args=False).sample()
            """,
            note="a Normal of numbers or CPU tensors samples on the host; rsample and Categorical do not check a std",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
            torch.manual_seed(0)
        """,
        bad="""
            y = torch.tanh(x)
            result = torch.normal(y, y.abs())
        """,
        good="""
            y = torch.tanh(x)
            result = (y + y.abs() * torch.randn_like(y)).detach()
        """,
        description="`torch.normal(mean, std_tensor)` vs scaling `randn_like` on the device",
        equal_results=False,  # the same draws only with the same generator state
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        if ctx.call_name(node) != "torch.normal":
            self._distribution_sample(node, ctx)
            return
        mean, std = argument(node, 0, "mean"), argument(node, 1, "std")
        if std is None:
            return
        value = ctx.value(std)
        if value.kind not in (Kind.TENSOR, Kind.BATCH) or value.on_cpu:
            return
        ctx.report(node, fix=self._fix(node, ctx, mean, std))

    def _distribution_sample(self, node: ast.Call, ctx: RuleContext) -> None:
        """`dist.sample()` of a Normal made from tensors: `torch.normal(loc, scale)` inside."""
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "sample":
            return
        if not only_parameters(node, {"sample_shape": 0}):
            return
        value = ctx.value(func.value)
        if value.kind is not Kind.OBJECT or value.ref != NORMAL_DISTRIBUTION.ref or value.on_cpu:
            return
        end = ctx.offsets(func)[1]
        fix = ctx.fix(
            Applicability.UNSAFE,
            "Sample with `rsample().detach()` (no std >= 0 check)",
            [(end - len("sample"), end, "rsample"), ctx.insert_at(ctx.offsets(node)[1], ".detach()")],
        )
        receiver = func.value
        call = f"{ctx.text(receiver.func)}(...).sample" if isinstance(receiver, ast.Call) else ctx.text(func)
        ctx.report(node, self.sample_message, fix=fix, call=call)

    def _fix(self, node: ast.Call, ctx: RuleContext, mean: ast.expr | None, std: ast.expr):
        if mean is None or not only_parameters(node, {"mean": 0, "std": 1}):
            return None
        mean_value = ctx.value(mean)
        torch, imports = torch_prefix(ctx)
        if mean_value.kind is Kind.TENSOR:
            s = operand_text(ctx, std)
            text = bind_once(ctx, mean, "m", lambda m: f"({m} + {s} * {torch}.randn_like({m})).detach()")
        elif mean_value.kind is Kind.PYTHON:
            m = operand_text(ctx, mean)
            if is_simple(std):
                text = f"({m} + {ctx.text(std)} * {torch}.randn_like({ctx.text(std)})).detach()"
            elif isinstance(mean, (ast.Constant, ast.UnaryOp)) or is_simple(mean):
                # mean is a number that evaluating later cannot change: bind std once
                text = bind_once(ctx, std, "s", lambda s: f"({m} + {s} * {torch}.randn_like({s})).detach()")
            else:
                return None
        else:
            return None
        return ctx.fix(
            Applicability.UNSAFE,
            "Scale `randn_like` on the device (no std >= 0 check)",
            [ctx.replace(node, text)],
            imports=imports,
        )

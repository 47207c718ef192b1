from __future__ import annotations

import ast
import re

from perflint.facts.context import RuleContext
from perflint.facts.distributions import VALIDATING_DISTRIBUTIONS, validating_distribution
from perflint.rewrite import RewriteError, add_keyword
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import device_input, literal, opaque_arguments

# A process-wide switch in this file turns validation off for every distribution.
_GLOBAL_OFF = re.compile(r"set_default_validate_args\(\s*(?:False|0)\s*\)")


class DistributionValidation(Rule):
    """## What it does
    Checks for `torch.distributions` objects (`Normal`, `Categorical`, `Bernoulli`, ...)
    constructed from tensors in code that runs every step without `validate_args=False`,
    and subclasses of them defined in the same file without a constructor of their own
    (`class FixedCategorical(torch.distributions.Categorical)`), which construct as their base.

    ## Why is this bad?
    Argument validation is on by default (it follows `__debug__`). The constructor checks
    every parameter against its constraint on the device and then decides in Python whether
    to raise: `if not torch._is_all_true(valid): raise ValueError(...)`. That `if` reads a
    bool from the GPU and waits for every queued kernel, once or more per distribution.
    `.log_prob(value)` validates its argument the same way.

    ## Example
    ```python
    for obs in loader:
        logits = policy(obs)
        dist = torch.distributions.Categorical(logits=logits)
        action = dist.sample()
    ```

    ## Use instead
    ```python
    for obs in loader:
        logits = policy(obs)
        dist = torch.distributions.Categorical(logits=logits, validate_args=False)
        action = dist.sample()
    ```
    Or call `torch.distributions.Distribution.set_default_validate_args(False)` once at
    start-up (a call in the same file silences this rule), or run with `python -O`.

    ## Fix safety
    The fix adds `validate_args=False` (or replaces `validate_args=None`). Sampling,
    `log_prob`, `entropy` and the other methods compute the same values for valid parameters
    and values. It is unsafe because invalid parameters (a negative scale, probabilities
    outside `[0, 1]`, NaN) and invalid `log_prob` values no longer raise `ValueError`: they
    give NaN or meaningless numbers, or fail later with another error (`sample()` of a
    `Normal` with a negative scale raises in `torch.normal`). No fix is offered when `validate_args=True` is explicit.

    ## References
    - `Distribution.__init__` and `_validate_sample` in torch/distributions/distribution.py.
    """

    code = "PFL227"
    name = "distribution-validation"
    message = "`{call}` validates its parameters on the host and waits for the GPU every step; pass `validate_args=False`"
    triggers = (b"distributions",)
    fix_availability = FixAvailability.SOMETIMES
    invalid = [
        Invalid(
            """
            import torch

            for obs, target in loader:
                mu, sigma = model(obs)
                dist = torch.distributions.Normal(mu, sigma)
                loss = -dist.log_prob(target).mean()
            """,
            fixed="""
            import torch

            for obs, target in loader:
                mu, sigma = model(obs)
                dist = torch.distributions.Normal(mu, sigma, validate_args=False)
                loss = -dist.log_prob(target).mean()
            """,
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import torch
            import torch.distributions as D
            from torch.distributions import Categorical
            from torch.distributions.bernoulli import Bernoulli

            class Policy(torch.nn.Module):
                def forward(self, x):
                    logits = self.head(x)
                    a = Categorical(logits=logits)
                    b = Bernoulli(logits=logits, validate_args=None)
                    c = D.Independent(D.Normal(logits, logits.exp(), validate_args=True), 1)
                    return a, b, c
            """,
            count=3,
            fixed="""
            import torch
            import torch.distributions as D
            from torch.distributions import Categorical
            from torch.distributions.bernoulli import Bernoulli

            class Policy(torch.nn.Module):
                def forward(self, x):
                    logits = self.head(x)
                    a = Categorical(logits=logits, validate_args=False)
                    b = Bernoulli(logits=logits, validate_args=False)
                    c = D.Independent(D.Normal(logits, logits.exp(), validate_args=True), 1)
                    return a, b, c
            """,
            unsafe_fixes=True,
            note="aliases; Independent validates nothing itself; no fix for an explicit True",
        ),
        Invalid(
            """
            import torch

            class FixedCategorical(torch.distributions.Categorical):
                def sample(self):
                    return super().sample().unsqueeze(-1)

            class Policy(torch.nn.Module):
                def forward(self, x):
                    return FixedCategorical(logits=self.head(x))
            """,
            fixed="""
            import torch

            class FixedCategorical(torch.distributions.Categorical):
                def sample(self):
                    return super().sample().unsqueeze(-1)

            class Policy(torch.nn.Module):
                def forward(self, x):
                    return FixedCategorical(logits=self.head(x), validate_args=False)
            """,
            unsafe_fixes=True,
            note="a subclass without a constructor of its own is constructed as its base",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for obs, target in loader:
                mu, sigma = model(obs)
                dist = torch.distributions.Normal(mu, sigma, validate_args=False)
                prior = torch.distributions.Normal(0.0, 1.0)
                flag = torch.distributions.Bernoulli(mu.sigmoid(), None, False)
            """,
            note="validation off; Python-number parameters are checked on the CPU",
        ),
        Valid(
            """
            import torch

            torch.distributions.Distribution.set_default_validate_args(False)
            for obs, target in loader:
                dist = torch.distributions.Normal(*model(obs))
                d2 = torch.distributions.Categorical(logits=model(obs))
            """,
            note="validation switched off for the whole process in this file",
        ),
        Valid(
            """
            import torch

            class Prior(torch.nn.Module):
                def __init__(self, loc, scale):
                    super().__init__()
                    self.prior = torch.distributions.Normal(loc, scale)
            """,
            note="once, at construction",
        ),
        Valid(
            """
            import numpy as np

            for obs, target in loader:
                z = np.random.normal(0.0, 1.0)
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            class TanhCategorical(torch.distributions.Categorical):
                def __init__(self, logits):
                    super().__init__(logits=torch.tanh(logits), validate_args=False)

            class Policy(torch.nn.Module):
                def forward(self, x):
                    return TanhCategorical(self.head(x))
            """,
            note="a subclass with its own constructor decides what the base gets",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            dist = torch.distributions.Normal(y, y.abs() + 1)
            result = dist.log_prob(y)
        """,
        good="""
            y = torch.tanh(x)
            dist = torch.distributions.Normal(y, y.abs() + 1, validate_args=False)
            result = dist.log_prob(y)
        """,
        description="`Normal(...).log_prob` with vs without argument validation",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = validating_distribution(ctx.call_name(node))
        shown = name
        if name is None and isinstance(node.func, ast.Name):
            # `class FixedCategorical(torch.distributions.Categorical)` with no `__init__` of
            # its own: the call is the library constructor's
            derived = ctx.library_class(node)
            if derived is not None and not derived[1]:
                name, shown = validating_distribution(derived[0]), node.func.id
        if name is None or any(kw.arg is None for kw in node.keywords):
            return
        if self._validation_off_in_file(ctx):
            return
        position = VALIDATING_DISTRIBUTIONS[name]
        flag = next((kw.value for kw in node.keywords if kw.arg == "validate_args"), None)
        if flag is None and len(node.args) > position and not any(isinstance(a, ast.Starred) for a in node.args):
            flag = node.args[position]
        setting = None if flag is None else literal(flag)
        if setting not in (None, True):
            return  # False, or a value decided elsewhere
        parameters = [a for a in node.args if a is not flag] + [kw.value for kw in node.keywords if kw.value is not flag]
        if not any(device_input(ctx, p.value if isinstance(p, ast.Starred) else p) for p in parameters):
            return  # numbers or CPU tensors: validated without waiting for a GPU
        fix = None
        if setting is None and not opaque_arguments(node):
            fix = _turn_off(node, flag, ctx)
        ctx.report(node, fix=fix, call=f"{shown}(...)")

    def _validation_off_in_file(self, ctx: RuleContext) -> bool:
        cached = self.state.get("off")
        if cached is None:
            cached = self.state["off"] = bool(_GLOBAL_OFF.search(ctx.source.text))
        return bool(cached)


def _turn_off(node: ast.Call, flag: ast.expr | None, ctx: RuleContext):
    if flag is not None:
        edit = ctx.replace(flag, "False")
    else:
        try:
            edit = ctx.rewrite(node, lambda call: add_keyword(call, "validate_args", "False"))
        except RewriteError:
            return None
    return ctx.fix(Applicability.UNSAFE, "Pass `validate_args=False` (invalid arguments no longer raise)", [edit])

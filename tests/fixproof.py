"""Helpers for tests that prove fixes by running code before and after with torch on the CPU.

The "after" code is always produced by the real fixer (`perflint.api.fix_source`), never
written by hand, so the tests prove what users get.
"""

from __future__ import annotations

import textwrap
from typing import Any, Callable

from perflint.api import fix_source

MODULE_TEMPLATE = """\
import torch
import torch.nn.functional as F


class Step(torch.nn.Module):
    def forward(self, {params}):
{body}
"""


def step_module(body: str, params: str = "x, y") -> str:
    """Wrap `body` in a `forward` (hot code, tensor parameters)."""
    return MODULE_TEMPLATE.format(params=params, body=textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8))


def fixed(source: str, code: str, unsafe: bool) -> str:
    outcome = fix_source(source, "step.py", unsafe=unsafe, select=[code])
    return outcome.text


def load_step(source: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "step.py", "exec"), namespace)
    return namespace["Step"]()


class OriginalRaised(Exception):
    """The original code raised on this input; the comparison does not apply."""


def run_both(source: str, code: str, unsafe: bool, *args: Any) -> tuple[Any, Any, str]:
    """Fix `source`, check a fix was applied, and run both versions on (copies of) `args`.

    Raises OriginalRaised when the original code raises: a fix may only change what code
    that runs computes, so callers skip (or separately document) such inputs.
    """
    import torch

    after = fixed(source, code, unsafe)
    assert after != source, f"no {code} fix was applied to:\n{source}"
    before_fn, after_fn = load_step(source), load_step(after)

    def copy(value: Any) -> Any:
        return value.clone() if isinstance(value, torch.Tensor) else value

    try:
        before = before_fn(*[copy(a) for a in args])
    except Exception as exc:
        raise OriginalRaised(f"{type(exc).__name__}: {exc}") from None
    return before, after_fn(*[copy(a) for a in args]), after


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except Exception as exc:  # the difference we want to show may be an error
        return "error", type(exc).__name__


def assert_identical(a: Any, b: Any) -> None:
    import torch

    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_identical(x, y)
    else:
        assert a == b or (a != a and b != b), (a, b)

"""Compare what the bad and good forms computed.

A form's `result` may be a tensor, a Python number, or a list/tuple/dict of them; the good
form often returns a 0-dim tensor where the bad one returned a number (`loss.detach()` vs
`loss.item()`), which compares by value. Tensors are compared on the CPU after `detach()`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Comparison:
    ok: bool
    detail: str = ""
    max_abs_diff: float | None = None


def _as_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    if isinstance(value, bool):
        return torch.tensor(value)
    if isinstance(value, int):
        return torch.tensor(value, dtype=torch.int64) if -2**63 <= value < 2**63 else None
    if isinstance(value, float):
        return torch.tensor(value, dtype=torch.float64)  # a Python float is a double
    if isinstance(value, complex):
        return torch.tensor(value, dtype=torch.complex128)
    return None


def _max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float | None:
    if a.numel() == 0 or a.dtype == torch.bool or b.dtype == torch.bool:
        return None
    if a.is_complex() or b.is_complex():
        diff = (a.to(torch.complex128) - b.to(torch.complex128)).abs()
    else:
        diff = (a.to(torch.float64) - b.to(torch.float64)).abs()
    finite = diff[~torch.isnan(diff)]
    return float(finite.max()) if finite.numel() else 0.0


def _compare_tensors(a: torch.Tensor, b: torch.Tensor, mode: str, rtol: float, atol: float) -> Comparison:
    if a.shape != b.shape:
        if a.numel() == 1 and b.numel() == 1:  # a number against a 0-dim or 1-element tensor
            a, b = a.reshape(()), b.reshape(())
        else:
            return Comparison(False, f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    if a.dtype == torch.bool or b.dtype == torch.bool:
        equal = bool(torch.equal(a.to(torch.bool), b.to(torch.bool))) if a.dtype == b.dtype else \
            bool(torch.equal(a.to(torch.int64), b.to(torch.int64)))
        return Comparison(equal, "" if equal else "boolean values differ")
    common = torch.promote_types(a.dtype, b.dtype)
    if not common.is_floating_point and not common.is_complex:
        equal = bool(torch.equal(a.to(common), b.to(common)))
        return Comparison(equal, "" if equal else "integer values differ", _max_abs_diff(a, b))
    x, y = a.to(common), b.to(common)
    if mode == "exact":
        same_nan = torch.equal(torch.isnan(x), torch.isnan(y))
        equal = same_nan and bool(torch.equal(torch.nan_to_num(x, nan=0.0), torch.nan_to_num(y, nan=0.0)))
    else:
        equal = bool(torch.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True))
    diff = _max_abs_diff(x, y)
    return Comparison(equal, "" if equal else f"values differ (max |diff| {diff:.3g})", diff)


def _list_as_tensor(value: Any, like: torch.Tensor) -> torch.Tensor | None:
    """`t.tolist()`-style nested lists, as a tensor of `like`'s kind (float64 for floats)."""
    if like.is_complex():
        dtype = torch.complex128
    elif like.is_floating_point():
        dtype = torch.float64
    elif like.dtype == torch.bool:
        dtype = torch.bool
    else:
        dtype = torch.int64
    try:
        return torch.tensor(value, dtype=dtype)
    except (TypeError, ValueError, RuntimeError):
        return None


def compare_results(a: Any, b: Any, mode: str = "exact", rtol: float = 1e-5, atol: float = 1e-6) -> Comparison:
    """Do two results hold the same values? `mode` is "exact" (NaN equals NaN) or "close".

    A Python number compares with a 0-dim tensor, and a nested list (`t.tolist()`) with a
    tensor, by value.
    """
    ta, tb = _as_tensor(a), _as_tensor(b)
    if (ta is None) != (tb is None) and isinstance(a if ta is None else b, (list, tuple)):
        other = _list_as_tensor(a if ta is None else b, tb if ta is None else ta)  # type: ignore[arg-type]
        if other is not None:
            ta, tb = (other, tb) if ta is None else (ta, other)
    if ta is not None and tb is not None:
        return _compare_tensors(ta, tb, mode, rtol, atol)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return Comparison(False, f"lengths differ: {len(a)} vs {len(b)}")
        worst: float | None = None
        for index, (x, y) in enumerate(zip(a, b)):
            item = compare_results(x, y, mode, rtol, atol)
            if not item.ok:
                return Comparison(False, f"[{index}]: {item.detail}", item.max_abs_diff)
            if item.max_abs_diff is not None:
                worst = item.max_abs_diff if worst is None else max(worst, item.max_abs_diff)
        return Comparison(True, "", worst)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return Comparison(False, f"keys differ: {sorted(map(str, a))} vs {sorted(map(str, b))}")
        return compare_results([a[k] for k in a], [b[k] for k in a], mode, rtol, atol)
    if a is None and b is None:
        return Comparison(True)
    try:
        equal = a == b
        return Comparison(bool(equal), "" if equal else f"{a!r} != {b!r}")
    except Exception as exc:  # an object whose == is not a plain bool
        return Comparison(False, f"cannot compare {type(a).__name__} and {type(b).__name__}: {exc}")


def same_structure(a: Any, b: Any) -> Comparison:
    """For `equal_results=False`: same kind of value, shape and dtype (values may differ)."""
    ta, tb = _as_tensor(a), _as_tensor(b)
    if ta is not None and tb is not None:
        if ta.numel() == 1 and tb.numel() == 1:
            return Comparison(True)
        if ta.shape != tb.shape or ta.dtype != tb.dtype:
            return Comparison(False, f"{tuple(ta.shape)} {ta.dtype} vs {tuple(tb.shape)} {tb.dtype}")
        return Comparison(True)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return Comparison(False, f"lengths differ: {len(a)} vs {len(b)}")
        for x, y in zip(a, b):
            item = same_structure(x, y)
            if not item.ok:
                return item
        return Comparison(True)
    ok = type(a) is type(b)
    return Comparison(ok, "" if ok else f"{type(a).__name__} vs {type(b).__name__}")


def finite_or_none(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value

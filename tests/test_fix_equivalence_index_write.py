"""Before/after proofs for scalar-write-through-index's fix (PFL232), with torch on the CPU:
`x[idx] = v` -> `x[idx] = x.new_full((), v)`.

Every dtype family, numbers that need a conversion (floats into integers, negatives into
unsigned, infinities, float16 overflow, real numbers into complex tensors), and indices with duplicates,
negative entries, two dimensions and none at all: the results are identical, and where
the original raises (a number that does not fit), the fixed form raises too.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import functools  # noqa: E402

from fixproof import assert_identical, fixed, load_step, outcome, step_module  # noqa: E402

CODE = "PFL232"
DTYPES = ["float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool", "complex64"]
# (the fix is offered for literals: `1e400` is infinity; NaN has no literal)
VALUES = ["1", "0", "-1", "1.7", "-2.5", "300", "70000.0", "1e40", "True", "False", "1e400", "-1e400"]
INDICES = {  # made where x lives, as an index computed on the device is
    "duplicates": "torch.tensor([0, 2, 2, 4], device=x.device)",
    "negative": "torch.tensor([-1, 0, -3], device=x.device)",
    "empty": "torch.zeros(0, dtype=torch.long, device=x.device)",
    "rows and columns": "(torch.tensor([0, 1, 1], device=x.device), torch.tensor([2, 0, 2], device=x.device))",
}


def _source(value: str, index: str) -> str:
    # `.long()` makes the index an integer tensor for the analyzer as for PyTorch
    body = f"""
        idx = {index}
        if isinstance(idx, tuple):
            rows, cols = idx[0].long(), idx[1].long()
            x[rows, cols] = {value}
        else:
            idx = idx.long()
            x[idx] = {value}
        return x
    """
    return step_module(body)


@functools.lru_cache(maxsize=None)
def _steps(value: str, index: str):
    """The original and the fixed step (one fix per source, whatever the dtype)."""
    source = _source(value, INDICES[index])
    after = fixed(source, CODE, False)
    assert after != source, f"no {CODE} fix was applied to:\n{source}"
    return load_step(source), load_step(after)


@pytest.mark.parametrize("index", sorted(INDICES))
@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_new_full_writes_what_the_number_writes(dtype, value, index):
    before_step, after_step = _steps(value, index)
    x = torch.zeros(5, 3, dtype=getattr(torch, dtype))
    before = outcome(lambda: before_step(x.clone(), None))
    after = outcome(lambda: after_step(x.clone(), None))
    if before[0] == "error":  # a number that does not fit: the fixed form raises the same error
        assert after == before
    else:
        assert after[0] == "ok", after
        assert_identical(before[1], after[1])


def test_the_fix_is_applied_and_writes_new_full():
    source = _source("1.0", INDICES["duplicates"])
    after = fixed(source, CODE, False)
    assert "x[idx] = x.new_full((), 1.0)" in after and "x[rows, cols] = x.new_full((), 1.0)" in after

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

from fixproof import OriginalRaised, assert_identical, fixed, load_step, run_both, step_module  # noqa: E402

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


@pytest.mark.parametrize("index", sorted(INDICES))
@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_new_full_writes_what_the_number_writes(dtype, value, index):
    source = _source(value, INDICES[index])
    x = torch.zeros(5, 3, dtype=getattr(torch, dtype))
    try:
        before, after, _ = run_both(source, CODE, False, x, None)
    except OriginalRaised as raised:
        after_source = fixed(source, CODE, False)
        with pytest.raises(Exception) as caught:
            load_step(after_source)(x.clone(), None)
        assert str(caught.value).split(":")[-1].strip() in str(raised) or type(caught.value).__name__ in str(raised)
        return
    assert_identical(before, after)


def test_the_fix_is_applied_and_writes_new_full():
    source = _source("1.0", INDICES["duplicates"])
    after = fixed(source, CODE, False)
    assert "x[idx] = x.new_full((), 1.0)" in after and "x[rows, cols] = x.new_full((), 1.0)" in after

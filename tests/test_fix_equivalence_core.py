"""Before/after proofs for the fixes of PFL201, PFL211 and PFL214 (torch on the CPU).

Safe fixes must give identical results on random inputs and edge cases (empty tensors,
all-true and all-false masks, mixed dtypes, NaN); unsafe fixes get a test that shows the case
their "Fix safety" section names.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from fixproof import OriginalRaised, assert_identical, fixed, load_step, outcome, run_both, step_module  # noqa: E402


def compare_all(source, code, unsafe, inputs):
    """Identical results wherever the original runs; returns the inputs where it raised."""
    raised = []
    for args in inputs:
        try:
            before, now, _ = run_both(source, code, unsafe, *args)
        except OriginalRaised:
            raised.append(args)
            continue
        assert_identical(before, now)
    return raised


def _float_inputs():
    g = torch.Generator().manual_seed(0)
    yield torch.randn(5, 7, generator=g)
    yield torch.randn(0, 3, generator=g)  # empty
    yield torch.full((4, 4), 2.0)  # all-false for `< 0`
    yield -torch.ones(3, 2)  # all-true for `< 0`
    x = torch.randn(6, generator=g)
    x[::2] = float("nan")
    yield x
    yield torch.randn(3, 4, generator=g).to(torch.float16)
    yield torch.tensor(-1.5)  # 0-dim


def _int_inputs():
    yield torch.tensor([[-3, 0, 2], [5, -1, 0]])
    yield torch.zeros(0, dtype=torch.int64)


# --------------------------------------------------------------------------- PFL211
WHERE_SCALAR = step_module(
    """
    x = x.clone()
    x[torch.where(x < 0)] = 0.0
    return x
    """
)
NONZERO_TENSOR = step_module(
    """
    x = x.clone()
    x[torch.nonzero(torch.isnan(x), as_tuple=True)] = y.mean()
    return x
    """
)


def _zero_dim_only(raised):
    """Where integer-index writes raise, the fix works: a 0-dim `x`, or a value of another
    dtype ("Index put requires the source and destination dtypes match"). That is the
    documented difference, and only for code that fails today."""
    return all(args[0].dim() == 0 or args[1].dtype != args[0].dtype for args in raised)


def test_where_write_with_scalar_is_safe_and_identical():
    after = fixed(WHERE_SCALAR, "PFL211", unsafe=False)
    assert "masked_fill_(x < 0, 0.0)" in after
    raised = compare_all(WHERE_SCALAR, "PFL211", False, [(x, x) for x in [*_float_inputs(), *_int_inputs()]])
    assert _zero_dim_only(raised)


def test_where_write_truncates_like_indexing_for_int_tensors():
    source = WHERE_SCALAR.replace("0.0", "1.5")
    assert compare_all(source, "PFL211", False, [(x, x) for x in _int_inputs()]) == []


def test_nonzero_write_with_zero_dim_tensor_is_safe_and_identical():
    after = fixed(NONZERO_TENSOR, "PFL211", unsafe=False)
    assert ".copy_(torch.where(torch.isnan(x), y.mean().to(x.dtype), x))" in after
    g = torch.Generator().manual_seed(1)
    inputs = [(x, y) for x in _float_inputs()
              for y in (torch.randn(4, generator=g), torch.randn(4, generator=g, dtype=torch.float64))]
    assert _zero_dim_only(compare_all(NONZERO_TENSOR, "PFL211", False, inputs))


def test_where_write_with_unprovable_mask_shape_is_unsafe_and_can_differ():
    source = step_module(
        """
        x = x.clone()
        x[torch.where(y > 0)] = 0.0
        return x
        """
    )
    assert fixed(source, "PFL211", unsafe=False) == source, "must not be applied as safe"
    after = fixed(source, "PFL211", unsafe=True)
    assert "masked_fill_(y > 0, 0.0)" in after
    # A mask over the leading dimension: indexing zeroes rows, masked_fill_ aligns the mask
    # with the trailing dimension instead.
    x = torch.arange(9.0).reshape(3, 3)
    y = torch.tensor([1.0, -1.0, -1.0])
    before = load_step(source)(x.clone(), y)
    now = outcome(lambda: load_step(after)(x.clone(), y))
    assert now[0] == "error" or not torch.equal(before, now[1])


def test_nonzero_count_is_the_same_number_but_a_tensor():
    source = step_module(
        """
        return len(torch.nonzero(x > 0)) + x.nonzero().shape[0]
        """
    )
    assert fixed(source, "PFL211", unsafe=False) == source
    for x in [*_float_inputs(), *_int_inputs()]:
        before, now, after = run_both(source, "PFL211", True, x, x)
        assert "count_nonzero" in after
        assert before == int(now)
    # The documented difference: an int becomes a 0-dim tensor.
    before, now, _ = run_both(source, "PFL211", True, torch.ones(3), None)
    assert json.dumps(before) == "6"
    assert outcome(lambda: json.dumps(now))[0] == "error"


# --------------------------------------------------------------------------- PFL214
MASK_WRITE_TENSOR = step_module(
    """
    x = x.clone()
    x[torch.isnan(x)] = y.mean()
    return x
    """
)
MASK_COPY = step_module(
    """
    x = x.clone()
    x[x > 0] = y[x > 0]
    return x
    """
)


def test_mask_write_of_zero_dim_tensor_is_safe_and_identical():
    after = fixed(MASK_WRITE_TENSOR, "PFL214", unsafe=False)
    assert "copy_(torch.where(torch.isnan(x), y.mean().to(x.dtype), x))" in after
    g = torch.Generator().manual_seed(2)
    inputs = [(x, torch.randn(3, generator=g)) for x in _float_inputs()]
    assert compare_all(MASK_WRITE_TENSOR, "PFL214", False, inputs) == []


def test_mask_copy_between_same_shaped_tensors_is_safe_and_identical():
    after = fixed(MASK_COPY, "PFL214", unsafe=False)
    assert "x.copy_(torch.where(x > 0, y.to(x.dtype), x))" in after
    g = torch.Generator().manual_seed(3)
    inputs = [(x, (torch.randn(x.shape, generator=g) * 10).to(dtype))
              for x in _float_inputs() for dtype in (torch.float32, torch.float64, torch.int64)]
    assert _zero_dim_only(compare_all(MASK_COPY, "PFL214", False, inputs))


def test_mask_copy_gradients_match():
    g = torch.Generator().manual_seed(4)
    source = step_module(
        """
        x = x * 1.0
        x[x > 0] = y[x > 0]
        return x
        """
    )
    after = fixed(source, "PFL214", unsafe=False)
    for _ in range(3):
        base_x = torch.randn(4, 5, generator=g)
        base_y = torch.randn(4, 5, generator=g)
        grads = []
        for code in (source, after):
            x = base_x.clone().requires_grad_(True)
            y = base_y.clone().requires_grad_(True)
            out = load_step(code)(x, y)
            (out * torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape)).sum().backward()
            grads.append((x.grad, y.grad))
        assert_identical(grads[0], grads[1])


def test_mask_write_with_leading_dimension_mask_is_unsafe_and_differs():
    source = step_module(
        """
        x = x.clone()
        keep = y.sum(1) > 0
        x[keep] = y[keep]
        return x
        """
    )
    assert fixed(source, "PFL214", unsafe=False) == source
    after = fixed(source, "PFL214", unsafe=True)
    assert "torch.where(keep, y.to(x.dtype), x)" in after
    x = torch.zeros(3, 3)
    y = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]])
    before = load_step(source)(x.clone(), y)
    now = outcome(lambda: load_step(after)(x.clone(), y))
    assert now[0] == "error" or not torch.equal(before, now[1])


MASKED_CE = step_module(
    """
    keep = y >= 0
    return F.cross_entropy(x[keep], y[keep]{extra})
    """
)


@pytest.mark.parametrize("extra", ["", ", reduction='sum'", ", label_smoothing=0.2", ", weight=torch.linspace(0.5, 2.0, 5, dtype=x.dtype)"])
def test_masked_cross_entropy_matches_ignore_index(extra):
    source = MASKED_CE.format(extra=extra)
    assert fixed(source, "PFL214", unsafe=False) == source, "unsafe: needs --unsafe-fixes"
    g = torch.Generator().manual_seed(5)
    cases = []
    for n in (1, 8, 33):
        logits = torch.randn(n, 5, generator=g, dtype=torch.float64)
        target = torch.randint(-1, 5, (n,), generator=g)
        cases.append((logits, target))
    cases.append((torch.randn(6, 5, dtype=torch.float64), torch.full((6,), -1)))  # nothing kept
    cases.append((torch.randn(6, 5, dtype=torch.float64), torch.arange(6) % 5))  # everything kept
    for logits, target in cases:
        before, now, after = run_both(source, "PFL214", True, logits, target)
        assert "ignore_index=-100" in after
        torch.testing.assert_close(before, now, rtol=0, atol=1e-12, equal_nan=True)


def test_masked_cross_entropy_rewrite_differs_when_logits_are_not_n_by_c():
    source = MASKED_CE.format(extra="")
    after = fixed(source, "PFL214", unsafe=True)
    logits = torch.randn(2, 3, 4)  # (N, L, C): the mask selects positions, classes are last
    target = torch.tensor([[0, 1, -1], [3, -1, 2]])
    before = load_step(source)(logits, target)
    now = outcome(lambda: load_step(after)(logits, target))
    assert now[0] == "error" or not torch.allclose(before, now[1])


def test_mask_count_is_the_same_number_but_a_tensor():
    source = step_module(
        """
        return len(x[x > 0]) + x[x > 0].shape[0] + x[x > 0].numel()
        """
    )
    for x in _float_inputs():
        before, now, after = run_both(source, "PFL214", True, x, x)
        assert after.count("count_nonzero") == 3
        assert before == int(now)


# --------------------------------------------------------------------------- PFL201
def test_mask_sum_item_count_keeps_value_on_device():
    source = step_module(
        """
        return (x > 0).sum().item()
        """
    )
    assert fixed(source, "PFL201", unsafe=False) == source
    for x in [*_float_inputs(), *_int_inputs()]:
        before, now, _ = run_both(source, "PFL201", True, x, x)
        assert isinstance(before, int) and isinstance(now, torch.Tensor) and before == int(now)

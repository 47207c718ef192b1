"""Before/after proofs for the static-shape rewrites of masked reductions (PFL214) and of
`idx = torch.nonzero(c, as_tuple=True); t[idx] = v` (PFL211), with torch on the CPU.

Each fix is run on edge cases (empty tensors, all-true and all-false masks, NaN and inf in
masked-out positions, integer and bool dtypes, masks over the leading dimensions only) and
compared with the original: identical for the fixes labelled exact, within a named tolerance
(float summation order) for the others. Each fixed form syncs strictly less than the
original under the CPU sync probe, and counts whose value would be read back on the host in
the loop get no fix (the sync would only move).
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from fixproof import OriginalRaised, assert_identical, fixed, load_step, outcome, run_both, step_module  # noqa: E402

from perflint.api import check_source  # noqa: E402


def _pairs():
    """(x, y) pairs: y's sign drives the masks (`y > 0`), x holds the values."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 7, generator=g)
    yield x, torch.randn(5, 7, generator=g)
    yield torch.randn(0, 3, generator=g), torch.randn(0, 3, generator=g)  # empty
    yield torch.randn(4, 4, generator=g), torch.ones(4, 4)  # all true
    yield torch.randn(4, 4, generator=g), -torch.ones(4, 4)  # all false
    x = torch.randn(3, 6, generator=g)
    y = torch.randn(3, 6, generator=g)
    x[y <= 0] = float("nan")  # NaN and inf only where the mask is false
    x[0, :][y[0, :] <= 0] = float("inf")
    yield x, y
    yield torch.randn(6, generator=g).to(torch.float64), torch.randn(6, generator=g)
    yield torch.randn(2, 3, generator=g).to(torch.float16), torch.tensor([[1.0, -1.0, 1.0], [1.0, 1.0, -1.0]])


def _int_pairs():
    yield torch.tensor([[-3, 0, 2], [5, -1, 0]]), torch.tensor([[1, -1, 1], [1, 1, -1]])
    yield torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)
    yield torch.tensor([7, 8, 9], dtype=torch.int32), torch.tensor([1, 1, 1], dtype=torch.int32)
    yield torch.tensor([True, False, True]), torch.tensor([-1, 1, 1])


def _leading_pairs():
    """A mask over the leading dimension of x (it selects rows)."""
    g = torch.Generator().manual_seed(1)
    yield torch.randn(4, 3, generator=g), torch.tensor([1.0, -1.0, 1.0, 1.0])
    yield torch.randn(3, 3, generator=g), torch.tensor([1.0, -1.0, -1.0])  # square: broadcasting would hide a bug
    yield torch.randn(2, 3, 4, generator=g), torch.tensor([-1.0, 1.0])
    yield torch.randn(3, 2, generator=g), -torch.ones(3)


def _close(before, now, rtol=1e-5, atol=1e-6):
    assert isinstance(now, torch.Tensor)
    before = torch.as_tensor(before)
    assert before.dtype == now.dtype and before.shape == now.shape, (before, now)
    torch.testing.assert_close(now, before, rtol=rtol, atol=atol, equal_nan=True)


def syncs(source: str, *args) -> int:
    """Syncs of `Step()(*args)` under the simulating CPU probe, the inputs on the device."""
    from perflint.harness.probe import SyncProbe

    step = load_step(source)
    with SyncProbe(simulate=True, accelerator=torch.device("cpu")) as probe:
        for a in args:
            if isinstance(a, torch.Tensor):
                probe.mark(a)
        outcome(lambda: step(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]))
    return probe.count


def assert_fewer_syncs(source: str, code: str, unsafe: bool, *args) -> None:
    after = fixed(source, code, unsafe)
    assert after != source
    before_count, after_count = syncs(source, *args), syncs(after, *args)
    assert after_count < before_count, (before_count, after_count, after)


# --------------------------------------------------------------------------- sums
MASKED_SUM = step_module(
    """
    keep = y > 0
    return x[keep].sum()
    """
)


def test_float_masked_sum_is_unsafe_and_close_everywhere():
    assert fixed(MASKED_SUM, "PFL214", unsafe=False) == MASKED_SUM, "float order differs: unsafe"
    after = fixed(MASKED_SUM, "PFL214", unsafe=True)
    assert "torch.where(keep.reshape(" in after.replace("\n", "").replace("(        ", "(") or "torch.where(" in after
    assert "[keep]" not in after
    for x, y in [*_pairs(), *_leading_pairs()]:
        before, now, _ = run_both(MASKED_SUM, "PFL214", True, x, y)
        tol = 1e-2 if x.dtype == torch.float16 else 1e-5
        _close(before, now, rtol=tol, atol=tol)
    assert_fewer_syncs(MASKED_SUM, "PFL214", True, *next(_pairs()))


def test_masked_sum_of_an_integer_tensor_is_safe_and_identical():
    source = step_module(
        """
        x = x.long()
        keep = y > 0
        return x[x > 0].sum() + x[keep].sum()
        """
    )
    after = fixed(source, "PFL214", unsafe=False)
    assert after.count("torch.where(") == 2, after
    scaled = [((x * 100).to(torch.int64), y) for x, y in _pairs() if x.isfinite().all()]
    for x, y in [*_int_pairs(), *scaled]:
        before, now, _ = run_both(source, "PFL214", False, x, y)
        assert_identical(before, now)
    for x, y in _leading_pairs():
        before, now, _ = run_both(source, "PFL214", False, (x * 100).long(), y)
        assert_identical(before, now)


def test_masked_sum_of_a_bool_tensor_is_safe_and_identical():
    source = step_module(
        """
        b = x > 0
        keep = y > 0
        return b[keep].sum()
        """
    )
    fixed_source = fixed(source, "PFL214", unsafe=False)
    assert "torch.where(" in fixed_source
    for x, y in [*_pairs(), *_leading_pairs()]:
        before, now, _ = run_both(source, "PFL214", False, x, y)
        assert_identical(before, now)


# --------------------------------------------------------------------------- mean
MASKED_MEAN = step_module(
    """
    return x[x > 0].mean()
    """
)


def test_masked_mean_is_unsafe_close_and_nan_when_empty_in_both():
    assert fixed(MASKED_MEAN, "PFL214", unsafe=False) == MASKED_MEAN
    after = fixed(MASKED_MEAN, "PFL214", unsafe=True)
    assert "torch.where(x > 0, x, 0).sum() / torch.count_nonzero(x > 0)" in after
    for x, _ in _pairs():
        before, now, _ = run_both(MASKED_MEAN, "PFL214", True, x, x)
        tol = 1e-2 if x.dtype == torch.float16 else 1e-5
        _close(before, now, rtol=tol, atol=tol)
    before, now, _ = run_both(MASKED_MEAN, "PFL214", True, -torch.ones(3), None)  # nothing selected
    assert math.isnan(before) and math.isnan(now)
    # The documented difference: an integer tensor makes the original raise; the fix divides.
    ints = torch.tensor([1, 2, -3])
    assert outcome(lambda: load_step(MASKED_MEAN)(ints, None))[0] == "error"
    assert load_step(after)(ints, None).item() == pytest.approx(1.5)
    assert_fewer_syncs(MASKED_MEAN, "PFL214", True, torch.randn(8), None)


def test_masked_mean_with_an_unprovable_mask_shape_has_no_fix():
    source = step_module(
        """
        return x[y > 0].mean()
        """
    )
    assert fixed(source, "PFL214", unsafe=True) == source


# --------------------------------------------------------------------------- max / min
MASKED_MAX = step_module(
    """
    x = x.float()
    keep = y > 0
    return x[keep].max(), x[keep].min()
    """
)


def test_masked_max_min_are_exact_when_something_is_selected():
    assert fixed(MASKED_MAX, "PFL214", unsafe=False) == MASKED_MAX
    after = fixed(MASKED_MAX, "PFL214", unsafe=True)
    assert 'float("-inf")).max()' in after and 'float("inf")).min()' in after
    for x, y in [*_pairs(), *_leading_pairs()]:
        try:
            before, now, _ = run_both(MASKED_MAX, "PFL214", True, x, y)
        except OriginalRaised:
            assert not (y > 0).any(), "only an empty selection makes max() raise"
            continue
        assert_identical(before, now)
    # The documented difference: nothing selected raises in the original, gives -inf/+inf.
    x, y = torch.randn(3), -torch.ones(3)
    assert outcome(lambda: load_step(MASKED_MAX)(x, y))[0] == "error"
    high, low = load_step(after)(x, y)
    assert high.item() == float("-inf") and low.item() == float("inf")
    assert_fewer_syncs(MASKED_MAX, "PFL214", True, torch.randn(6), torch.randn(6))


def test_masked_max_of_unknown_dtype_has_no_fix():
    source = step_module(
        """
        return x[y > 0].max()
        """
    )
    assert fixed(source, "PFL214", unsafe=True) == source, "an integer x would need another fill value"


# --------------------------------------------------------------------------- counts of matches
ACCURACY = step_module(
    """
    keep = y >= 0
    return (x[keep] == y[keep]).sum()
    """
)


def test_match_count_is_identical_when_shapes_match():
    assert fixed(ACCURACY, "PFL214", unsafe=False) == ACCURACY, "x's shape is not provable: unsafe"
    after = fixed(ACCURACY, "PFL214", unsafe=True)
    assert "((x == y) & keep).sum()" in after
    g = torch.Generator().manual_seed(3)
    cases = []
    for n in (0, 1, 9, 40):
        y = torch.randint(-1, 4, (n,), generator=g)
        cases.append((torch.randint(0, 4, (n,), generator=g), y))
    cases.append((torch.tensor([1, 2, 3]), torch.tensor([1, 2, 3])))  # all kept, all match
    cases.append((torch.tensor([1, 2, 3]), torch.tensor([-1, -1, -1])))  # nothing kept
    y = torch.tensor([0.0, -1.0, 2.0, -1.0])
    cases.append((torch.tensor([0.0, float("nan"), 2.0, float("inf")]), y))  # NaN/inf only where dropped
    cases.append((torch.tensor([True, False, True, True]), torch.tensor([1, -1, 0, 1])))  # bool vs int
    cases.append((torch.randint(0, 3, (4, 5), generator=g), torch.randint(-1, 3, (4, 5), generator=g)))
    cases.append((torch.tensor([[1, 2], [3, 4]], dtype=torch.int32), torch.tensor([[1, -1], [3, 4]], dtype=torch.int32)))
    for x, y in cases:
        before, now, _ = run_both(ACCURACY, "PFL214", True, x, y)
        assert_identical(before, now)
    assert_fewer_syncs(ACCURACY, "PFL214", True, *cases[2])


def test_match_count_differs_only_for_differently_shaped_operands():
    """The unsafe case: x of another shape than y (broadcast after selection differs)."""
    after = fixed(ACCURACY, "PFL214", unsafe=True)
    x = torch.tensor([[1, 1, 1], [0, 0, 0], [0, 0, 0]])  # rows selected vs the mask aligned to columns
    y = torch.tensor([1, -1, -1])
    before = outcome(lambda: load_step(ACCURACY)(x, y))
    now = outcome(lambda: load_step(after)(x, y))
    assert before != now


def test_match_count_with_a_leading_mask_widens_the_mask():
    source = step_module(
        """
        keep = y.sum(1) > 0
        return (x[keep] != y[keep]).sum()
        """
    )
    after = fixed(source, "PFL214", unsafe=True)
    assert "keep.reshape(keep.shape + (1,) * (x.dim() - keep.dim()))" in after
    for x, y in _leading_pairs():
        if x.dim() != 2:
            continue
        y2 = y.reshape(-1, *([1] * (x.dim() - 1))).expand_as(x).contiguous()
        before, now, _ = run_both(source, "PFL214", True, x, y2)
        assert_identical(before, now)
        before, now, _ = run_both(source, "PFL214", True, (x > 0).long(), (y2 > 0).long())
        assert_identical(before, now)


THRESHOLD_COUNT = step_module(
    """
    keep = y != 255
    return torch.count_nonzero(y[keep] > 0) + (x[keep] > 0.5).sum()
    """
)


def test_threshold_count_with_one_selected_operand_is_safe_and_identical():
    after = fixed(THRESHOLD_COUNT, "PFL214", unsafe=False)
    assert "torch.count_nonzero((y > 0) & keep)" in after
    assert "[keep]" not in after, after
    g = torch.Generator().manual_seed(4)
    cases = [(torch.rand(0), torch.zeros(0, dtype=torch.long))]
    for shape in ((10,), (3, 4)):
        y = torch.randint(0, 5, shape, generator=g)
        y[torch.rand(shape, generator=g) < 0.3] = 255
        cases.append((torch.rand(shape, generator=g), y))
    cases.append((torch.tensor([0.9, float("nan"), float("inf")]), torch.tensor([1, 255, 255])))
    cases.append((torch.rand(3), torch.full((3,), 255)))  # nothing kept
    cases.append((torch.rand(3), torch.ones(3, dtype=torch.long)))  # everything kept
    for x, y in cases:
        before, now, _ = run_both(THRESHOLD_COUNT, "PFL214", False, x, y)
        assert_identical(before, now)
    assert_fewer_syncs(THRESHOLD_COUNT, "PFL214", False, *cases[1])


def test_module_constant_in_the_mask_is_resolved():
    source = (
        "import torch\n\nIGNORE = 255\n\n\n"
        "class Step(torch.nn.Module):\n"
        "    def forward(self, x, y):\n"
        "        keep = y != IGNORE\n"
        "        return (y[keep] > 0).sum(), (x[keep] == y[keep]).sum()\n"
    )
    after = fixed(source, "PFL214", unsafe=False)
    assert "((y > 0) & keep).sum()" in after, after
    assert "(x[keep] == y[keep])" in after, "x's shape is still unknown: not safe"


# --------------------------------------------------------------------------- counts and the host
def _fixes(source: str, code: str = "PFL214") -> list:
    return [d for d in check_source(source, "step.py") if d.code == code and d.fix is not None]


def test_counts_read_on_the_host_in_the_loop_get_no_fix():
    source = (
        "import torch\n\n"
        "def run(loader, model):\n"
        "    total = 0\n"
        "    for x, y in loader:\n"
        "        out = model(x)\n"
        "        n = len(out[y > 0])\n"
        "        if len(y[y > 0]):\n"
        "            pass\n"
        "        for i in range(n):\n"
        "            pass\n"
        "        k = torch.nonzero(y > 0).shape[0]\n"
        "        print(f'{k}')\n"
        "        total += len(out[y > 1])\n"
        "    return float(total)\n"
    )
    found = [(d.location.row, d.code) for d in check_source(source, "step.py")
             if d.code in ("PFL211", "PFL214") and d.fix is not None]
    # only the accumulator read once, after the loop, keeps its fix
    assert found == [(14, "PFL214")], found


def test_two_statement_nonzero_write_is_safe_and_identical():
    source = step_module(
        """
        x = x.clone()
        idx = torch.nonzero(x < 0, as_tuple=True)
        x[idx] = 0.0
        rows = torch.where(torch.isnan(x))
        x[rows] = y.mean()
        return x
        """
    )
    after = fixed(source, "PFL211", unsafe=False)
    assert "idx" not in after and "rows" not in after, after
    assert "x.masked_fill_(x < 0, 0.0)" in after
    for x, _ in _pairs():
        before, now, _ = run_both(source, "PFL211", False, x, torch.randn(3).to(x.dtype))
        assert_identical(before, now)
    scalar_only = step_module(
        """
        x = x.clone()
        idx = torch.nonzero(x < 0, as_tuple=True)
        x[idx] = 7
        return x
        """
    )
    for x, _ in [*_int_pairs(), *_pairs()]:
        if x.dtype != torch.bool:
            before, now, _ = run_both(scalar_only, "PFL211", False, x, None)
            assert_identical(before, now)
    assert_fewer_syncs(source, "PFL211", False, torch.randn(4, 4), torch.randn(3))


def test_two_statement_nonzero_write_keeps_indices_used_elsewhere():
    source = step_module(
        """
        x = x.clone()
        idx = torch.nonzero(x < 0, as_tuple=True)
        x[idx] = 0.0
        return x, idx
        """
    )
    assert fixed(source, "PFL211", unsafe=True) == source


def test_two_statement_nonzero_write_with_an_unprovable_mask_is_unsafe():
    source = step_module(
        """
        x = x.clone()
        idx = (y > 0).nonzero(as_tuple=True)
        x[idx] = 1.0
        return x
        """
    )
    assert fixed(source, "PFL211", unsafe=False) == source
    after = fixed(source, "PFL211", unsafe=True)
    assert "x.masked_fill_(y > 0, 1.0)" in after
    x, y = torch.zeros(3, 3), torch.tensor([1.0, -1.0, -1.0])  # rows by indexing, columns by masked_fill_
    assert not torch.equal(load_step(source)(x.clone(), y), load_step(after)(x.clone(), y))


# --------------------------------------------------------------------------- PFL213
SELECT_SUM = step_module(
    """
    return torch.masked_select(x, y > 0).sum(), x.masked_select(y > 0).count_nonzero()
    """
)


def test_masked_select_sum_is_close_and_broadcasts_like_where():
    assert fixed(SELECT_SUM, "PFL213", unsafe=False) != SELECT_SUM, "the count is exact: safe"
    after = fixed(SELECT_SUM, "PFL213", unsafe=True)
    assert "masked_select" not in after and "torch.where(y > 0, x, 0).sum()" in after
    g = torch.Generator().manual_seed(6)
    broadcast = [(torch.randn(4, 3, generator=g), torch.randn(3, generator=g)),  # mask on the trailing dim
                 (torch.randn(3, generator=g), torch.randn(2, 3, generator=g)),  # x broadcast to the mask
                 (torch.randn(3, 1, generator=g), torch.randn(1, 4, generator=g))]
    for x, y in [*_pairs(), *broadcast]:
        before, now, _ = run_both(SELECT_SUM, "PFL213", True, x, y)
        tol = 1e-2 if x.dtype == torch.float16 else 1e-5
        _close(before[0], now[0], rtol=tol, atol=tol)
        assert_identical(before[1], now[1])
    assert_fewer_syncs(SELECT_SUM, "PFL213", True, torch.randn(6), torch.randn(6))


def test_masked_select_integer_sum_is_safe_and_identical():
    source = step_module(
        """
        x = x.long()
        return torch.masked_select(x, y > 0).sum()
        """
    )
    assert "torch.where(y > 0, x, 0).sum()" in fixed(source, "PFL213", unsafe=False)
    for x, y in [*_int_pairs(), *(((x * 100).nan_to_num(0, 0, 0), y) for x, y in _pairs())]:
        before, now, _ = run_both(source, "PFL213", False, x, y)
        assert_identical(before, now)


def test_masked_select_max_is_exact_unless_nothing_is_selected():
    source = step_module(
        """
        x = x.float()
        return torch.masked_select(x, y > 0).max()
        """
    )
    assert fixed(source, "PFL213", unsafe=False) == source
    after = fixed(source, "PFL213", unsafe=True)
    for x, y in _pairs():
        try:
            before, now, _ = run_both(source, "PFL213", True, x, y)
        except OriginalRaised:
            assert not (y > 0).any()
            if x.numel() == 0:  # an empty tensor: max() raises in both
                assert outcome(lambda x=x, y=y: load_step(after)(x, y))[0] == "error"
            else:
                assert load_step(after)(x, y).item() == float("-inf")
            continue
        assert_identical(before, now)


ACCURACY_MEAN = step_module(
    """
    keep = y >= 0
    return (x[keep] == y[keep]).float().mean(), (x[keep] != y[keep]).double().mean()
    """
)


def test_accuracy_mean_is_unsafe_and_matches_on_the_cpu():
    """`(a[m] == b[m]).float().mean()` -> count / count_nonzero(m). Identical on the CPU for
    these sizes (both round k/n once); CUDA's mean multiplies by 1/n, hence unsafe/close."""
    assert fixed(ACCURACY_MEAN, "PFL214", unsafe=False) == ACCURACY_MEAN
    after = fixed(ACCURACY_MEAN, "PFL214", unsafe=True)
    assert "((x == y) & keep).sum().float() / torch.count_nonzero(keep)" in after, after
    g = torch.Generator().manual_seed(7)
    for n in (0, 1, 3, 7, 100, 1000, 4097):
        y = torch.randint(-1, 3, (n,), generator=g)
        x = torch.randint(0, 3, (n,), generator=g)
        before, now, _ = run_both(ACCURACY_MEAN, "PFL214", True, x, y)
        for b, a in zip(before, now):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=0, equal_nan=True)
    before, now, _ = run_both(ACCURACY_MEAN, "PFL214", True, torch.ones(3), -torch.ones(3))  # nothing kept
    assert all(math.isnan(v) for v in (*before, *now))
    assert_fewer_syncs(ACCURACY_MEAN, "PFL214", True, torch.ones(5), torch.ones(5))


# --------------------------------------------------------------------------- the earlier fixes sync less too
@pytest.mark.parametrize("code,unsafe,body", [
    ("PFL214", False, "x = x.clone()\nx[torch.isnan(x)] = y.mean()\nreturn x"),
    ("PFL214", False, "x = x.clone()\nx[x > 0] = y[x > 0]\nreturn x"),
    ("PFL214", True, "return len(x[x > 0]) + x[x > 0].shape[0] + x[x > 0].numel()"),
    ("PFL214", True, "keep = y >= 0\nreturn F.cross_entropy(x[keep], y[keep])"),
    ("PFL211", False, "x = x.clone()\nx[torch.where(x < 0)] = 0.0\nreturn x"),
    ("PFL211", False, "x = x.clone()\nx[torch.nonzero(torch.isnan(x), as_tuple=True)] = y.mean()\nreturn x"),
    ("PFL211", True, "return len(torch.nonzero(x > 0)) + x.nonzero().shape[0]"),
], ids=["mask-write-0dim", "mask-copy", "mask-counts", "masked-cross-entropy", "where-write", "nonzero-write-0dim",
        "nonzero-counts"])
def test_every_mask_fix_syncs_strictly_less(code, unsafe, body):
    source = step_module(body)
    if "cross_entropy" in body:
        args = (torch.randn(6, 4), torch.tensor([0, -1, 3, 2, -1, 1]))
    else:
        args = (torch.randn(4, 5), torch.randn(4, 5))
    assert_fewer_syncs(source, code, unsafe, *args)

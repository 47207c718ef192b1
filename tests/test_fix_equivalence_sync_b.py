"""Proof for the fixes of PFL212-PFL227: the code is fixed by the real fixer
(`perflint.api.fix_source`), then the original and the fixed code both run with torch on
the CPU. Safe fixes must give identical results on random inputs and edge cases; unsafe
fixes must agree where their "Fix safety" section says they agree, and each test shows a
concrete input where they differ, as that section says."""

from __future__ import annotations

import json
import math
import textwrap
import warnings

import pytest

torch = pytest.importorskip("torch")

from perflint.api import fix_source  # noqa: E402


def _fix(code: str, rule: str, *, unsafe: bool = True) -> tuple[str, str]:
    """(original, fixed) source; the fix must change the code and be idempotent."""
    source = textwrap.dedent(code).lstrip("\n")
    fixed = fix_source(source, "example.py", unsafe=unsafe, select=[rule]).text
    assert fixed != source, f"{rule} offered no applicable fix for:\n{source}"
    again = fix_source(fixed, "example.py", unsafe=unsafe, select=[rule]).text
    assert again == fixed, "fixes must be idempotent"
    return source, fixed


def _load(text: str) -> dict:
    namespace: dict = {}
    exec(compile(text, "<example>", "exec"), namespace)
    return namespace


def _pair(code: str, rule: str, name: str = "M", *, unsafe: bool = True):
    """The object called `name` from the original and from the fixed code."""
    source, fixed = _fix(code, rule, unsafe=unsafe)
    return _load(source)[name], _load(fixed)[name], fixed


def _same_tensor(a, b) -> bool:
    return (a.dtype == b.dtype and a.shape == b.shape and a.device == b.device
            and a.requires_grad == b.requires_grad and torch.equal(a, b))


def _raises(fn, *args) -> bool:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - any error counts: the point is that one raises
        return True
    return False


# --------------------------------------------------------------------------- PFL212
_UNIQUE_COUNTS = """
import torch

class M(torch.nn.Module):
    def forward(self, x):
        a = torch.unique(x).numel()
        b = len(x.unique())
        c = torch.unique(x, sorted=False).shape[0]
        d = x.unique().size(0)
        e = torch.unique_consecutive(x).numel()
        f = len(x.unique_consecutive())
        return a, b, c, d, e, f
"""


def _unique_inputs():
    nan, inf = float("nan"), float("inf")
    gen = torch.Generator().manual_seed(0)
    yield torch.randint(0, 5, (50,), generator=gen)
    yield torch.randint(-3, 3, (4, 7, 3), generator=gen)
    yield torch.randint(0, 2, (30,), generator=gen).bool()
    yield torch.tensor([True, True])
    yield torch.tensor([nan, nan, 1.0, 1.0, nan])  # every NaN is its own value
    yield torch.tensor([0.0, -0.0, 0.0])  # one value
    yield torch.tensor([inf, -inf, inf, 1.0, -inf])
    yield torch.tensor(3.5)  # 0-dim
    yield torch.tensor([7])
    yield torch.empty(0)
    yield torch.empty(0, 3, dtype=torch.long)
    for dtype in (torch.int8, torch.uint8, torch.int32, torch.float16, torch.bfloat16, torch.float64):
        yield torch.randint(0, 6, (40,), generator=gen).to(dtype)
    yield torch.randn(64, generator=gen).round()


def test_unique_count_equals_on_every_input():
    before, after, fixed = _pair(_UNIQUE_COUNTS, "PFL212")
    assert fixed.count("lambda s:") == 6
    for x in _unique_inputs():
        expected = before()(x)
        got = after()(x)
        assert [int(g) for g in got] == list(expected), x
        for g in got:
            assert isinstance(g, torch.Tensor) and g.dim() == 0 and g.dtype == torch.int64


def test_unique_count_differs_in_type():
    before, after, _ = _pair(_UNIQUE_COUNTS, "PFL212")
    x = torch.tensor([1, 2, 2, 3])
    old, new = before()(x)[0], after()(x)[0]
    assert old == 3 and int(new) == 3
    assert isinstance(old, int) and not isinstance(new, int)  # a 0-dim tensor, not an int
    assert str(old) == "3" and str(new) == "tensor(3)"
    assert (old == 3) is True and isinstance(new == 3, torch.Tensor)
    assert _raises(json.dumps, new) and not _raises(json.dumps, old)


# --------------------------------------------------------------------------- PFL215
_STACK = """
import torch

class M(torch.nn.Module):
    def forward(self, x, y):
        reduced = torch.tensor([x.sum(), y.max()])
        elements = torch.tensor([x, y])
        return reduced, elements

class L(torch.nn.Module):
    def forward(self, x):
        parts = [p.sum() for p in x]
        return torch.tensor(parts)
"""


def test_stack_matches_tensor_values_dtype_shape_and_grad():
    source, fixed = _fix(_STACK, "PFL215")
    assert "stack([x.sum(), y.max()]).detach()" in fixed
    assert "stack([x, y]).detach().flatten()" in fixed
    before, after = _load(source), _load(fixed)
    pairs = [
        (torch.tensor([1.5]), torch.tensor([2.0])),
        (torch.tensor(1, dtype=torch.int32), torch.tensor(2)),  # promotion int32 + int64
        (torch.tensor(True), torch.tensor(3)),  # bool + int64
        (torch.tensor(1, dtype=torch.int8), torch.tensor(2.5, dtype=torch.float16)),
        (torch.tensor(True), torch.tensor(False)),
        (torch.tensor(float("nan")), torch.tensor(float("-inf"), dtype=torch.float64)),
        (torch.randn(1, 1, requires_grad=True), torch.randn(1, 1)),  # detached in both
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x, y in pairs:
            for old, new in zip(before["M"]()(x, y), after["M"]()(x, y)):
                assert old.dtype == new.dtype and old.shape == new.shape, (x, y)
                assert not old.requires_grad and not new.requires_grad
                assert torch.equal(old.nan_to_num(), new.nan_to_num())
        rows = torch.randn(5, 3)
        assert _same_tensor(before["L"]()(rows), after["L"]()(rows))


def test_stack_differs_on_device_empty_and_multi_value_elements():
    source, fixed = _fix(_STACK, "PFL215")
    before, after = _load(source), _load(fixed)
    # The result's device: torch.tensor uses the default device, stack the elements' one.
    x, y = torch.tensor(1.0), torch.tensor(2.0)
    torch.set_default_device("meta")
    try:
        old = before["M"]()(x, y)[0]
        new = after["M"]()(x, y)[0]
    finally:
        torch.set_default_device(None)
    assert old.device.type == "meta" and new.device.type == "cpu"
    # An empty list: torch.tensor gives an empty tensor, stack raises.
    assert before["L"]()(torch.empty(0, 3)).shape == (0,)
    assert _raises(after["L"](), torch.empty(0, 3))
    # Elements with several values: torch.tensor raises, stack stacks them.
    assert _raises(before["M"](), torch.ones(2), torch.ones(2))
    assert after["M"]()(torch.ones(2), torch.ones(2))[1].shape == (4,)


# --------------------------------------------------------------------------- PFL217
_BINCOUNT = """
import torch

class M(torch.nn.Module):
    def forward(self, x):
        x = x % 10
        return torch.bincount(x, minlength=10), x.bincount(None, 10), torch.bincount(x.clamp(0, 9), minlength=10)
"""


def test_bincount_scatter_equals_when_values_are_below_minlength():
    before, after, fixed = _pair(_BINCOUNT, "PFL217")
    assert fixed.count("scatter_add_") == 3
    gen = torch.Generator().manual_seed(1)
    inputs = [torch.randint(0, 10, (1000,), generator=gen), torch.tensor([9]), torch.zeros(0, dtype=torch.long),
              torch.randint(0, 3, (7,), generator=gen).to(torch.int32),
              torch.randint(0, 10, (20,), generator=gen).to(torch.uint8)]
    for x in inputs:
        for old, new in zip(before()(x), after()(x)):
            assert _same_tensor(old, new), x


def test_bincount_scatter_differs_on_floats():
    before, after, _ = _pair(_BINCOUNT, "PFL217")
    values = torch.tensor([1.5, 2.0, 1.0])
    assert _raises(before(), values)  # bincount rejects floats
    assert after()(values)[0][:3].tolist() == [0, 2, 1]  # the fix truncates them


_BINCOUNT_UNPROVEN = """
import torch

class M(torch.nn.Module):
    def forward(self, x):
        return torch.bincount(x, minlength=10), torch.bincount(x, minlength=int(x.max()) + 1)
"""


def test_bincount_with_values_not_known_below_minlength_is_display_only():
    from perflint.api import check_source
    from perflint.types import Applicability

    source = textwrap.dedent(_BINCOUNT_UNPROVEN).lstrip("\n")
    assert fix_source(source, "example.py", unsafe=True, select=["PFL217"]).text == source
    found = check_source(source, "example.py", select=["PFL217"])
    assert [d.fix.applicability for d in found] == [Applicability.DISPLAY_ONLY] * 2
    # Why: a value at or past minlength is ordinary input; bincount grows, scatter_add_ fails.
    big = torch.tensor([1, 12])
    assert torch.bincount(big, minlength=10).shape == (13,)
    assert _raises(lambda: torch.zeros(10, dtype=torch.long).scatter_add_(0, big, torch.ones_like(big)))


# --------------------------------------------------------------------------- PFL220
_EQUAL = """
import torch

class M(torch.nn.Module):
    def forward(self, x, y):
        a = torch.equal(x, x.round())
        b = x.equal(x.clamp(-1, 1))
        c = torch.allclose(x, y)
        d = torch.allclose(x, y, 1e-3, 1e-5, True)
        e = x.allclose(y, atol=0.5)
        return a, b, c, d, e
"""


def test_equal_and_allclose_agree_as_booleans():
    before, after, fixed = _pair(_EQUAL, "PFL220")
    assert "(x == x.round()).all()" in fixed and "isclose(x, y, 1e-3, 1e-5, True).all()" in fixed
    nan, inf = float("nan"), float("inf")
    gen = torch.Generator().manual_seed(2)
    base = torch.randn(4, 5, generator=gen)
    pairs = [
        (base, base.clone()),
        (base, base + 1e-4),
        (base, base + 0.4),
        (base, torch.randn(4, 5, generator=gen)),
        (base.round(), base),  # `x == x.round()` all true
        (base.clamp(-1, 1), base),
        (torch.tensor([1.0, nan]), torch.tensor([1.0, nan])),  # NaN: unequal unless equal_nan
        (torch.tensor([inf, -inf, 0.0, -0.0]), torch.tensor([inf, -inf, -0.0, 0.0])),
        (torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4])),
        (torch.empty(0), torch.empty(0)),
        (torch.tensor(2.0), torch.tensor(2.0)),
        (torch.randn(3, 1, generator=gen), torch.randn(1, 4, generator=gen)),  # allclose broadcasts too
    ]
    for x, y in pairs:
        old = before()(x, y)
        new = after()(x, y)
        assert [bool(n) for n in new] == list(old), (x, y)
        assert all(isinstance(n, torch.Tensor) and n.dtype == torch.bool for n in new)


def test_equal_on_mixed_dtypes_compares_by_value():
    source, fixed = _fix(
        """
        import torch

        class M(torch.nn.Module):
            def forward(self, x):
                return torch.equal(x, x.double())
        """,
        "PFL220",
    )
    before, after = _load(source)["M"](), _load(fixed)["M"]()
    for x in (torch.tensor([1, 2, 3]), torch.tensor([0.1, float("nan")]), torch.tensor([True, False])):
        assert before(x) == bool(after(x)), x


_EQUAL_UNKNOWN_SHAPES = """
import torch

class M(torch.nn.Module):
    def forward(self, x1, x2):
        same = torch.equal(x1, x2)
        return same
"""


def test_equal_of_unknown_shapes_is_display_only_because_shapes_differ_in_real_use():
    from perflint.api import check_source
    from perflint.types import Applicability

    source = textwrap.dedent(_EQUAL_UNKNOWN_SHAPES).lstrip("\n")
    assert fix_source(source, "example.py", unsafe=True, select=["PFL220"]).text == source
    [finding] = check_source(source, "example.py", select=["PFL220"])
    assert finding.fix.applicability is Applicability.DISPLAY_ONLY
    # Why: a kernel called with train (n, d) and test (1, d) inputs.
    x1, x2 = torch.tensor([[2.0, 2.0], [2.0, 2.0]]), torch.tensor([[2.0, 2.0]])
    assert torch.equal(x1, x2) is False and bool((x1 == x2).all()) is True  # `==` broadcasts
    assert _raises(lambda: (torch.ones(3) == torch.ones(2)).all())  # or raises


def test_equal_result_is_a_tensor_not_true():
    before, after, _ = _pair(_EQUAL, "PFL220")
    y = torch.tensor([2.0, 2.0])
    assert before()(y, y)[0] is True and after()(y, y)[0] is not True  # a tensor, not True


def test_equal_truth_tests_get_no_fix():
    code = """
    import torch

    class M(torch.nn.Module):
        def forward(self, x, y):
            if torch.equal(x, x.round()):
                return x
            assert torch.allclose(x, y)
            close = torch.allclose(x, y)
            if not close:
                return y
            x1_eq_x2 = torch.equal(x, x.clone())
            return x if x1_eq_x2 else y
    """
    source = textwrap.dedent(code).lstrip("\n")
    assert fix_source(source, "example.py", unsafe=True, select=["PFL220"]).text == source


# --------------------------------------------------------------------------- PFL222
_LINALG = """
import torch

class M(torch.nn.Module):
    def forward(self, a, b):
        inv = torch.linalg.inv(a)
        chol = torch.linalg.cholesky(a, upper=True)
        sol = torch.linalg.solve(a, b, left=True)
        lu, piv = torch.linalg.lu_factor(a)
        ld, ldpiv = torch.linalg.ldl_factor(a)
        old_inv = torch.inverse(a)
        method_inv = a.inverse()
        pivots = torch.linalg.lu_factor(a).pivots
        return inv, chol, sol, lu, piv, ld, ldpiv, old_inv, method_inv, pivots
"""


def _spd(n: int, batch=(), dtype=torch.float64, seed=3):
    gen = torch.Generator().manual_seed(seed)
    m = torch.randn(*batch, n, n, generator=gen, dtype=dtype)
    return m @ m.transpose(-1, -2) + n * torch.eye(n, dtype=dtype)


def test_linalg_ex_variants_equal_on_valid_input_with_gradients():
    before, after, fixed = _pair(_LINALG, "PFL222")
    for name in ("inv_ex(a).inverse", "cholesky_ex(a, upper=True).L", "solve_ex(a, b, left=True).result",
                 "lu_factor_ex(a)[:2]", "ldl_factor_ex(a)[:2]", "lu_factor_ex(a).pivots"):
        assert name in fixed, name
    for batch, dtype in (((), torch.float64), ((3,), torch.float32), ((2, 2), torch.float64)):
        a = _spd(4, batch, dtype)
        b = torch.randn(*batch, 4, 2, dtype=dtype)
        for old, new in zip(before()(a, b), after()(a, b)):
            assert _same_tensor(old, new)
        # gradients flow the same way through the _ex variants
        grads = []
        for module in (before(), after()):
            leaf = a.clone().requires_grad_(True)
            outputs = module(leaf, b)
            # ldl_factor has no derivative, with or without _ex
            sum(outputs[i].sum() for i in (0, 1, 2, 3, 7, 8)).backward()
            grads.append(leaf.grad)
        assert torch.allclose(grads[0], grads[1])


def test_linalg_ex_variants_do_not_raise_on_singular_input():
    code = """
    import torch

    class M(torch.nn.Module):
        def forward(self, a):
            return torch.linalg.inv(a)

    class C(torch.nn.Module):
        def forward(self, a):
            return torch.linalg.cholesky(a)
    """
    source, fixed = _fix(code, "PFL222")
    before, after = _load(source), _load(fixed)
    singular = torch.zeros(3, 3)
    not_pd = -torch.eye(3)
    assert _raises(before["M"](), singular) and not _raises(after["M"](), singular)
    assert _raises(before["C"](), not_pd) and not _raises(after["C"](), not_pd)


def test_lu_factor_gets_a_fix_only_where_the_result_is_unpacked():
    returned = textwrap.dedent("""
    import torch

    class M(torch.nn.Module):
        def forward(self, a):
            return torch.linalg.lu_factor(a)
    """).lstrip("\n")
    # `[:2]` would be a plain tuple: a caller's `.LU` would fail, so no fix.
    assert fix_source(returned, "example.py", unsafe=True, select=["PFL222"]).text == returned
    assert not hasattr(torch.linalg.lu_factor_ex(_spd(3))[:2], "LU")
    code = """
    import torch

    class M(torch.nn.Module):
        def forward(self, a):
            lu, piv = torch.linalg.lu_factor(a)
            return lu, piv
    """
    before, after, fixed = _pair(code, "PFL222")
    assert "lu_factor_ex(a)[:2]" in fixed
    for n in (1, 3, 5):
        a = _spd(n)
        for old, new in zip(before()(a), after()(a)):
            assert _same_tensor(old, new)


# --------------------------------------------------------------------------- PFL223
_NORMAL = """
import torch

class M(torch.nn.Module):
    def forward(self, mean, std):
        return torch.normal(mean, std)

class F(torch.nn.Module):
    def forward(self, std):
        return torch.normal(-1.5, std)
"""


def test_normal_draws_the_same_numbers_on_the_cpu():
    source, fixed = _fix(_NORMAL, "PFL223")
    assert "(mean + std * torch.randn_like(mean)).detach()" in fixed
    assert "(-1.5 + std * torch.randn_like(std)).detach()" in fixed
    before, after = _load(source), _load(fixed)
    gen = torch.Generator().manual_seed(4)
    for shape, std_shape, dtype in (((5, 3), (5, 3), torch.float32), ((7,), (7,), torch.float64),
                                    ((4, 3), (3,), torch.float32), ((), (), torch.float32)):
        mean = torch.randn(shape, generator=gen, dtype=dtype)
        std = torch.rand(std_shape, generator=gen, dtype=dtype)
        std.view(-1)[0] = 0.0  # zero std: mean exactly
        torch.manual_seed(11)
        old = before["M"]()(mean, std)
        torch.manual_seed(11)
        new = after["M"]()(mean, std)
        assert _same_tensor(old, new)
        torch.manual_seed(12)
        old = before["F"]()(std)
        torch.manual_seed(12)
        new = after["F"]()(std)
        assert _same_tensor(old, new)


def test_normal_rewrite_differs_as_documented():
    source, fixed = _fix(_NORMAL, "PFL223")
    before, after = _load(source), _load(fixed)
    negative = -torch.ones(3)
    assert _raises(before["M"](), torch.zeros(3), negative)  # std >= 0 is checked
    assert not _raises(after["M"](), torch.zeros(3), negative)
    # std with more elements than mean: normal draws 6 numbers, the fix draws 3 and reuses them
    torch.manual_seed(0)
    old = before["M"]()(torch.zeros(3), torch.ones(2, 3))
    torch.manual_seed(0)
    new = after["M"]()(torch.zeros(3), torch.ones(2, 3))
    assert old.shape == new.shape == (2, 3)
    assert torch.equal(new[0], new[1]) and not torch.equal(old[0], old[1])
    # dtype: normal keeps mean's dtype, the fix promotes
    assert before["M"]()(torch.zeros(2), torch.ones(2, dtype=torch.float64)).dtype == torch.float32
    assert after["M"]()(torch.zeros(2), torch.ones(2, dtype=torch.float64)).dtype == torch.float64
    # autograd: normal passes zero gradients; the detached fix passes none
    mean = torch.zeros(3, requires_grad=True)
    before["M"]()(mean, torch.ones(3)).sum().backward()
    assert torch.equal(mean.grad, torch.zeros(3))
    assert not after["M"]()(torch.zeros(3, requires_grad=True), torch.ones(3)).requires_grad


_NORMAL_SAMPLE = """
import torch
from torch.distributions import HalfNormal, Independent, LogNormal, Normal

class Sampler(torch.nn.Module):
    def forward(self, mu, std, shape):
        a = Normal(mu, std, validate_args=False).sample(shape)
        b = Independent(Normal(mu, 0.25, validate_args=False), 1).sample()
        c = LogNormal(mu, std, validate_args=False).sample(sample_shape=shape)
        d = HalfNormal(std, validate_args=False).sample()
        return a, b, c, d
"""


def test_distribution_sample_draws_the_same_numbers_on_the_cpu():
    source, fixed = _fix(_NORMAL_SAMPLE, "PFL223")
    assert fixed.count(".rsample(") == 4 and fixed.count(".detach()") == 4
    before, after = _load(source), _load(fixed)
    gen = torch.Generator().manual_seed(6)
    for shape, dtype in (((5, 3), torch.float32), ((7,), torch.float64), ((1,), torch.float32)):
        mu = torch.randn(shape, generator=gen, dtype=dtype, requires_grad=True)
        std = torch.rand(shape, generator=gen, dtype=dtype)
        std.view(-1)[0] = 0.0  # zero scale: loc exactly
        for sample_shape in ((), (4,), (2, 3)):
            torch.manual_seed(13)
            old = before["Sampler"]()(mu, std, sample_shape)
            torch.manual_seed(13)
            new = after["Sampler"]()(mu, std, sample_shape)
            for o, n in zip(old, new):
                assert _same_tensor(o, n) and not n.requires_grad


def test_distribution_sample_rewrite_differs_as_documented():
    source, fixed = _fix(_NORMAL_SAMPLE, "PFL223")
    before, after = _load(source), _load(fixed)
    negative = -torch.ones(3)  # validation off: only torch.normal's own check sees it
    assert _raises(before["Sampler"](), torch.zeros(3), negative, ())
    assert not _raises(after["Sampler"](), torch.zeros(3), negative, ())


# --------------------------------------------------------------------------- PFL224
_CLIP = """
import torch

def train(model, loader, optimizer):
    norms = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5, error_if_nonfinite=True))
    return norms, [p.grad.clone() for p in model.parameters()]
"""


def _clip_run(train, poison: bool):
    torch.manual_seed(5)
    model = torch.nn.Linear(4, 2)
    if poison:
        with torch.no_grad():
            model.weight[0, 0] = float("inf")
    loader = [(torch.randn(8, 4), torch.randn(8, 2)) for _ in range(3)]
    return train(model, loader, torch.optim.SGD(model.parameters(), lr=0.0))


def test_clip_grad_norm_without_the_flag_is_the_same_on_finite_gradients():
    before, after, fixed = _pair(_CLIP, "PFL224", name="train")
    assert "error_if_nonfinite" not in fixed
    (old_norms, old_grads), (new_norms, new_grads) = _clip_run(before, False), _clip_run(after, False)
    assert all(_same_tensor(a, b) for a, b in zip(old_norms, new_norms))
    assert all(_same_tensor(a, b) for a, b in zip(old_grads, new_grads))


def test_clip_grad_norm_without_the_flag_does_not_raise_on_inf():
    before, after, _ = _pair(_CLIP, "PFL224", name="train")
    assert _raises(_clip_run, before, True)
    norms, _ = _clip_run(after, True)
    assert not math.isfinite(norms[0].item())


# --------------------------------------------------------------------------- PFL226 (safe)
_EMPTY_CACHE = """
import torch

def train(model, loader, optimizer):
    out = []
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        torch.cuda.empty_cache()  # keep memory low
        if step % 2:
            torch.cuda.empty_cache()
        out.append(loss.detach())
    return out, [p.detach().clone() for p in model.parameters()]
"""


def _train_run(train, loader):
    torch.manual_seed(6)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    return train(model, loader, torch.optim.SGD(model.parameters(), lr=0.1))


def test_empty_cache_removal_is_safe_and_changes_no_result():
    before, after, fixed = _pair(_EMPTY_CACHE, "PFL226", name="train", unsafe=False)
    assert "empty_cache" not in fixed and "# keep memory low" not in fixed
    assert "if step % 2:\n            pass\n" in fixed
    gen = torch.Generator().manual_seed(7)
    loaders = [
        [(torch.randn(8, 4, generator=gen), torch.randn(8, 2, generator=gen)) for _ in range(5)],
        [(torch.full((3, 4), float("nan")), torch.zeros(3, 2))],
        [(torch.empty(0, 4), torch.empty(0, 2))],
        [],
    ]
    for loader in loaders:
        (old_losses, old_params), (new_losses, new_params) = _train_run(before, loader), _train_run(after, loader)
        assert len(old_losses) == len(new_losses)
        for a, b in zip(old_losses + old_params, new_losses + new_params):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert torch.equal(a.nan_to_num(), b.nan_to_num()) and torch.equal(a.isnan(), b.isnan())


# --------------------------------------------------------------------------- PFL227
_DISTRIBUTIONS = """
import torch

class M(torch.nn.Module):
    def forward(self, loc, scale, logits, value):
        normal = torch.distributions.Normal(loc, scale)
        cat = torch.distributions.Categorical(logits=logits)
        return normal.log_prob(value), normal.sample(), cat.log_prob(cat.sample()), cat.entropy()
"""


def test_distribution_without_validation_computes_the_same():
    before, after, fixed = _pair(_DISTRIBUTIONS, "PFL227")
    assert fixed.count("validate_args=False") == 2
    gen = torch.Generator().manual_seed(8)
    loc, scale = torch.randn(6, generator=gen), torch.rand(6, generator=gen) + 0.1
    logits, value = torch.randn(6, 4, generator=gen), torch.randn(6, generator=gen)
    torch.manual_seed(9)
    old = before()(loc, scale, logits, value)
    torch.manual_seed(9)
    new = after()(loc, scale, logits, value)
    assert all(_same_tensor(a, b) for a, b in zip(old, new))


def test_distribution_without_validation_accepts_invalid_parameters():
    code = """
    import torch

    class M(torch.nn.Module):
        def forward(self, loc, scale, value):
            return torch.distributions.Normal(loc, scale).log_prob(value)

    class B(torch.nn.Module):
        def forward(self, p):
            return torch.distributions.Bernoulli(probs=p).log_prob(torch.ones_like(p))
    """
    source, fixed = _fix(code, "PFL227")
    before, after = _load(source), _load(fixed)
    args = (torch.zeros(2), -torch.ones(2), torch.zeros(2))
    assert _raises(before["M"](), *args)  # ValueError: scale must be positive
    assert after["M"]()(*args).isnan().all()  # no error, NaN
    p = torch.tensor([0.5, 1.5])
    assert _raises(before["B"](), p)
    assert not _raises(after["B"](), p)

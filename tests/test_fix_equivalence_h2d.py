"""Before/after proofs for the fix of PFL109 (implicit-host-to-device-copy), torch on the CPU.

The fix gives a host index the indexed tensor's device (`torch.arange(n, device=x.device)`).
Run on the CPU, `x.device` is the CPU: the fixed code must compute exactly what the original
does there (and on an accelerator the index is then built where it is used). The unsafe
case (the index also indexes another tensor, which on a GPU may live elsewhere) and the
display-only one (host data) are checked for their applicability here; the GPU-only
difference of the unsafe case cannot be shown on a CPU build.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fixproof import OriginalRaised, assert_identical, fixed, run_both, step_module  # noqa: E402

from perflint.api import check_source  # noqa: E402
from perflint.types import Applicability  # noqa: E402

CODE = "PFL109"

ROWS = step_module(
    """
    x = x.to(device)
    rows = torch.arange(x.shape[0])
    picked = x[rows, y]
    x[rows, 0] = 0.0
    return picked, x
    """,
    params="x, y, device",
)
INLINE = step_module(
    """
    x = x.to(device)
    head = x[torch.arange(1, x.shape[0], 2)]
    flipped = x[torch.arange(x.shape[0] - 1, -1, -1)]
    return head, flipped
    """,
    params="x, y, device",
)
SHARED = step_module(
    """
    x = x.to(device)
    idx = torch.arange(x.shape[0] // 2)
    return x[idx], y[idx]
    """,
    params="x, y, device",
)
HOST_DATA = step_module(
    """
    x = x.to(device)
    src = torch.as_tensor(y.numpy(), dtype=torch.int64)
    return x[src]
    """,
    params="x, y, device",
)


def _inputs():
    g = torch.Generator().manual_seed(0)
    yield torch.randn(5, 7, generator=g), torch.randint(0, 7, (5,), generator=g)
    yield torch.randint(-9, 9, (6, 3), generator=g), torch.tensor([0, 2, 1, 0, 2, 1])
    yield torch.randn(1, 1, generator=g).to(torch.float16), torch.zeros(1, dtype=torch.int64)
    yield torch.randn(0, 4, generator=g), torch.zeros(0, dtype=torch.int64)  # empty
    yield torch.randn(3, 2, generator=g), torch.tensor([0, 1, 5])  # out of range: raises


def _applicability(source: str) -> set[Applicability]:
    found = [d for d in check_source(source, "step.py", select=[CODE]) if d.code == CODE]
    assert found, f"{CODE} does not report:\n{source}"
    return {d.fix.applicability for d in found if d.fix is not None}


@pytest.mark.parametrize("source", [ROWS, INLINE], ids=["assigned", "inline"])
def test_index_built_on_the_indexed_tensors_device_is_safe_and_identical(source):
    assert _applicability(source) == {Applicability.SAFE}
    after = fixed(source, CODE, unsafe=False)
    assert "device=x.device" in after
    ran = 0
    for x, y in _inputs():
        try:
            before, now, _ = run_both(source, CODE, False, x, y, "cpu")
        except OriginalRaised:
            continue  # the fix keeps the error too: both index with the same values
        ran += 1
        if isinstance(before, tuple):
            for a, b in zip(before, now):
                assert_identical(a, b)
        else:
            assert_identical(before, now)
    assert ran >= 3


def test_out_of_range_index_raises_before_and_after():
    after = fixed(ROWS, CODE, unsafe=False)
    x, y = torch.randn(3, 2), torch.tensor([0, 1, 5])
    for source in (ROWS, after):
        namespace: dict = {}
        exec(compile(source, "step.py", "exec"), namespace)
        with pytest.raises(IndexError):
            namespace["Step"]()(x.clone(), y, "cpu")


def test_index_shared_with_another_tensor_is_unsafe_and_identical_on_one_device():
    """On a GPU `y[idx]` would raise once `idx` lives on `x`'s device and `y` does not
    ("indices should be either on cpu or on the same device as the indexed tensor"); on one
    device both forms compute the same."""
    assert _applicability(SHARED) == {Applicability.UNSAFE}
    assert fixed(SHARED, CODE, unsafe=False) == SHARED
    for x, _ in _inputs():
        y = torch.randn(x.shape[0], 2)
        before, now, after = run_both(SHARED, CODE, True, x, y, "cpu")
        assert "device=x.device" in after
        for a, b in zip(before, now):
            assert_identical(a, b)


def test_host_data_is_display_only():
    """`torch.as_tensor(data, device=...)` still builds on the host and copies: never applied."""
    assert _applicability(HOST_DATA) == {Applicability.DISPLAY_ONLY}
    assert fixed(HOST_DATA, CODE, unsafe=True) == HOST_DATA
    (finding,) = [d for d in check_source(HOST_DATA, "step.py", select=[CODE]) if d.code == CODE]
    (edit,) = finding.fix.edits
    shown = HOST_DATA.replace("torch.as_tensor(y.numpy(), dtype=torch.int64)", edit.content)
    assert shown != HOST_DATA and "device=x.device" in edit.content
    for source in (HOST_DATA, shown):  # what the displayed rewrite would compute, on the CPU
        namespace: dict = {}
        exec(compile(source, "step.py", "exec"), namespace)
        x, y = torch.randn(4, 3), torch.tensor([3, 0, 0])
        assert_identical(namespace["Step"]()(x, y, "cpu"), x[y])

"""PFL201's display-only suggestion for per-step logging lists (issue 14 item 3):
`losses.append(loss.item())` in a loop -> `losses.append(loss.detach())`, then
`torch.stack(losses).tolist()` once after the loop. Never applied; what it suggests is checked
here: the same Python floats, one sync instead of one per step."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from perflint.api import check_source, fix_source  # noqa: E402
from perflint.harness.probe import SyncProbe  # noqa: E402
from perflint.types import Applicability  # noqa: E402

LOOP = """
import torch

losses = []
for x, y in loader:
    loss = criterion(model(x), y)
    losses.append(loss.item())
"""


def test_the_suggestion_is_display_only_and_never_applied():
    source = textwrap.dedent(LOOP).lstrip("\n")
    [finding] = check_source(source, "train.py", select=["PFL201"])
    assert finding.fix.applicability is Applicability.DISPLAY_ONLY
    assert "losses.append(loss.detach())" in finding.fix.message
    assert "torch.stack(losses).tolist()" in finding.fix.message
    assert fix_source(source, "train.py", unsafe=True, select=["PFL201"]).text == source


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_stacked_read_gives_the_same_floats_with_one_sync(dtype):
    device = torch.device("cpu")
    values = [torch.tensor(v, dtype=dtype) for v in (0.1, -2.5, float("nan"), float("inf"), 1e-8, 0.0)]

    with SyncProbe(simulate=True, accelerator=device) as probe:
        for v in values:
            probe.mark(v)
        per_step = [v.item() for v in values]
        syncs_per_step = probe.count
        probe.reset()
        kept = [v.detach() for v in values]
        once = torch.stack(kept).tolist()
        syncs_once = probe.count
    assert syncs_per_step == len(values) and syncs_once == 1
    assert len(once) == len(per_step)
    for a, b in zip(per_step, once):
        assert type(a) is type(b) is float
        assert a == b or (a != a and b != b)  # NaN stays NaN


def test_empty_list_needs_a_guard():
    # The one edge: no steps ran. `torch.stack([])` raises where `[]` was fine.
    with pytest.raises(RuntimeError):
        torch.stack([]).tolist()

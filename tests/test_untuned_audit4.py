"""Findings from reading training code nobody had tuned on (rotation H: dino, deit, mae,
swav, DomainBed, minGPT, DiT, dlrm), each with its twin."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def _found(source: str, filename: str = "train.py") -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, filename, select=["ALL"])}


_SHOW_MISTAKES = """
    import torch

    def evaluate(model, loader, device):
        correct_total = 0
        shown = 0
        for x, y in loader:
            {reset}pred = model(x.to(device)).argmax(1)
            y = y.to(device)
            correct_total += (pred == y).sum()
            for i in range(x.size(0)):
                if {test}:
                    shown += 1
                    print("predicted %d but it is %d" % (pred[i], y[i]), pred[i].tolist())
        return correct_total
"""


def test_a_block_that_counts_its_own_runs_against_a_small_cap_is_not_per_step():
    """minGPT's evaluation prints the first few mistakes: `if not correct[i] and
    mistakes_printed_already < 5: mistakes_printed_already += 1; print(...)` runs five times
    in all, not every batch."""
    capped = _found(_SHOW_MISTAKES.format(reset="", test="shown < 5"))
    assert not capped
    assert not _found(_SHOW_MISTAKES.format(reset="", test="5 > shown"))


def test_a_cap_that_starts_again_every_step_still_runs_every_step():
    reset_each_batch = _found(_SHOW_MISTAKES.format(reset="shown = 0\n            ", test="shown < 5"))
    assert {(14, "PFL210"), (14, "PFL202")} <= reset_each_batch
    uncapped = _found(_SHOW_MISTAKES.format(reset="", test="shown < 500"))  # not a few
    assert {(13, "PFL210"), (13, "PFL202")} <= uncapped
    not_counted = _found(_SHOW_MISTAKES.format(reset="", test="shown < 5").replace("shown += 1", "pass"))
    assert {(13, "PFL210"), (13, "PFL202")} <= not_counted


_WARN_ONCE = """
    import torch

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)
            self.warned = 0

        def forward(self, x):
            {reset}out = self.proj(x)
            if self.warned < 3:
                self.warned += 1
                print("first batches: output norm", out.norm().item())
            return out
"""


def test_an_attribute_counter_caps_a_block_across_calls():
    assert (13, "PFL201") not in _found(_WARN_ONCE.format(reset=""))
    # reset on every call: the block runs every step
    assert (14, "PFL201") in _found(_WARN_ONCE.format(reset="self.warned = 0\n            "))

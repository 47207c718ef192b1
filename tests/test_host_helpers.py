"""A small helper given host tensors returns host tensors: its body is walked again with
them when its summary only says "a tensor" (fairseq's `compute_mask_indices`: masks built
on the CPU with `conv2d` in a nested helper), so reading its result costs no sync."""

from __future__ import annotations

import textwrap

from perflint.api import check_source

SOURCE = """
    import torch

    class Masker(torch.nn.Module):
        def forward(self, x):
            w = torch.ones((1, 1, 3, 3))

            def neighbours(m):
                return torch.nn.functional.conv2d(m.unsqueeze(1), w, padding="same").clamp_max_(1)

            mask = {mask}
            grown = neighbours(mask)
            count = int(grown.sum().item())
            return x[:, :count]
"""


def rows(mask: str) -> list[int]:
    found = check_source(textwrap.dedent(SOURCE.format(mask=mask)).lstrip(), "masks.py", select=["PFL201"])
    return [d.location.row for d in found]


def test_a_helper_of_host_tensors_returns_host_tensors():
    assert rows("torch.zeros((2, 8, 8))") == []


def test_the_same_helper_of_device_tensors_is_still_read_back():
    assert rows("torch.zeros((2, 8, 8), device=x.device)") == [12]

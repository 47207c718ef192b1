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


def test_a_private_torch_helper_returns_no_guessed_tensor():
    # BasicSR's reduce_loss: `F._Reduction.get_enum(reduction)` is a Python int
    found = check_source(textwrap.dedent("""
        import torch.nn.functional as F

        def reduce_loss(loss, reduction):
            reduction_enum = F._Reduction.get_enum(reduction)
            if reduction_enum == 0:
                return loss
            return loss.mean() if reduction_enum == 1 else loss.sum()

        class L1Loss(torch.nn.Module):
            def forward(self, pred, target):
                return reduce_loss((pred - target).abs(), "mean")
    """).lstrip(), "losses.py", select=["PFL2"])
    assert found == []


def test_parts_unpacked_from_a_batch_the_loop_does_not_move_stay_on_the_host():
    # deep-person-reid's feature extraction: only the images go to the GPU
    found = check_source(textwrap.dedent("""
        import torch

        def parse_data_for_test(data):
            return data["img"], data["pid"], data["camid"]

        def extract(model, loader):
            pids_, feats = [], []
            for batch_idx, data in enumerate(loader):
                imgs, pids, camids = parse_data_for_test(data)
                imgs = imgs.cuda()
                feats.append(model(imgs).cpu())
                pids_.extend(pids.tolist())
            return torch.cat(feats), pids_
    """).lstrip(), "engine.py", select=["PFL2"])
    assert [(d.location.row, d.code) for d in found] == [(11, "PFL203")]

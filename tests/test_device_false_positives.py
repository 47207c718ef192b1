"""Steps that run once per epoch (issue #13). The device-fact twins (targets never moved,
plain ints) live in the rule modules' examples: PFL201 `item`, PFL204 `python_scalar`,
PFL206 `truthiness`."""

from __future__ import annotations

import textwrap

import pytest

from perflint.api import check_source


def _codes(code: str) -> list[tuple[int, str]]:
    return sorted((d.location.row, d.code) for d in check_source(textwrap.dedent(code).lstrip(), "example.py")
                  if d.code.startswith("PFL2"))


LAST_STEP = """
    import torch
    from tqdm import tqdm

    def train(model, trainloader, testloader, optimizer, device, epochs):
        for epoch in range(epochs):
            pbar = tqdm(enumerate(trainloader), total=len(trainloader))
            for i, (images, labels) in pbar:
                images = images.to(device, non_blocking=True)
                loss = model(images).sum()
                loss.backward()
                optimizer.step()
                if i == len(trainloader) - 1:  # last batch: once per epoch
                    print(f"epoch {epoch} loss {loss.item():.3f}")
                if i + 1 == len(trainloader):
                    torch.cuda.synchronize()
                if len(images) == 3:
                    print(loss.item())
"""


def test_the_last_step_of_an_epoch_runs_once_per_epoch():
    # YOLOv5's classify/train.py validates `if i == len(trainloader) - 1`; a length
    # compared with a constant is no step counter (row 17 stays reported)
    assert _codes(LAST_STEP) == [(17, "PFL201")]

"""False positives that the device facts remove (issue #13): values that never left the
host read in the step, and plain Python numbers. Each shape comes with its twin that does
sync (so the test shows the fact, not a blind spot). Shapes after DETR's / torchvision's
detection references (`for images, targets in data_loader`) and YOLO-style counters.

(The rule modules of PFL201/PFL204/PFL206 are owned elsewhere; these twins are meant to
move into their `valid` / `invalid` lists.)
"""

from __future__ import annotations

import textwrap

import pytest

from perflint.api import check_source


def _codes(code: str) -> list[tuple[int, str]]:
    return sorted((d.location.row, d.code) for d in check_source(textwrap.dedent(code).lstrip(), "example.py")
                  if d.code.startswith("PFL2"))


TARGETS_ON_HOST = """
    import torch

    def train_one_epoch(model, criterion, data_loader, optimizer, device):
        model.train()
        for images, targets in data_loader:
            images = list(image.to(device) for image in images)
            samples = images[0].to(device)
            outputs = model(samples)
            num_labels = targets[0]["labels"].item()
            num_boxes = int(targets[0]["boxes"].shape[0])
            first = float(targets[1]["area"].sum())
            loss = criterion(outputs, num_labels, num_boxes, first)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""

TARGETS_MOVED = """
    import torch

    def train_one_epoch(model, criterion, data_loader, optimizer, device):
        model.train()
        for images, targets in data_loader:
            samples = images.to(device)
            targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
            outputs = model(samples)
            num_labels = targets[0]["labels"].item()
            loss = criterion(outputs, num_labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_targets_never_moved_are_read_on_the_host():
    assert _codes(TARGETS_ON_HOST) == []


def test_targets_moved_to_the_device_sync():
    assert (9, "PFL201") in _codes(TARGETS_MOVED)


PLAIN_INTS = """
    import torch

    def evaluate(model, loader, device, n):
        hits = []
        for images, labels in loader:
            out = model(images.to(device))
            hits.append(len(out))
            total = sum(hits)
            if total > 100:
                break
            assert isinstance(n, int)
            if n > 2:
                print(int(n))
            score = out.max()
            assert isinstance(score, float)
            if score > 0.5:
                print(score)
"""

TENSOR_COUNTS = """
    import torch

    def evaluate(model, loader, device, n):
        hits = []
        for images, labels in loader:
            out = model(images.to(device))
            hits.append((out > 0).sum())
            total = sum(hits)
            if total > 100:
                break
            score = out.max()
            if score > 0.5:
                print(score)
"""


def test_plain_ints_do_not_sync():
    assert _codes(PLAIN_INTS) == []


@pytest.mark.parametrize("row", [9, 12])
def test_tensor_counts_do(row):
    assert (row, "PFL206") in _codes(TENSOR_COUNTS)


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

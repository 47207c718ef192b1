"""Iterating an accelerator tensor yields 0-dim tensors (issue #13): each `int()`,
`float()`, list index or `range()` bound of one reads it to the host. Shapes after YOLOv5's
`detect.py` (`for c in det[:, 5].unique(): n = (det[:, 5] == c).sum()`, `names[int(c)]`),
each with the twin that stays on the host.

(The rule modules, PFL204/PFL205, are owned elsewhere; these twins are meant to move into
their `valid` / `invalid` lists.)
"""

from __future__ import annotations

import textwrap

from perflint.api import check_source


ON_DEVICE = """
    import torch

    NAMES = ["person", "car", "dog"]

    def detect(model, dataset, device):
        for path, im, im0s in dataset:
            im = torch.from_numpy(im).to(device)
            pred = model(im)
            for i, det in enumerate(pred):
                s = ""
                for c in det[:, 5].unique():
                    n = (det[:, 5] == c).sum()
                    s += f"{NAMES[int(c)]} "
                counts = [0, 0, 0]
                for cls in det[:, 5]:
                    counts[cls] += 1
                for j in range(n):
                    print(j)
"""

ON_HOST = """
    import torch

    NAMES = ["person", "car", "dog"]

    def detect(model, dataset, device):
        for path, im, im0s in dataset:
            im = torch.from_numpy(im).to(device)
            pred = model(im)
            for i, det in enumerate(pred):
                det = det.cpu()
                s = ""
                for c in det[:, 5].unique():
                    n = (det[:, 5] == c).sum()
                    s += f"{NAMES[int(c)]} "
                counts = [0, 0, 0]
                for cls in det[:, 5]:
                    counts[cls] += 1
                for j in range(n):
                    print(j)
"""


def _found(code: str) -> list[tuple[int, str]]:
    return sorted((d.location.row, d.code) for d in check_source(textwrap.dedent(code).lstrip(), "example.py")
                  if d.code.startswith("PFL2"))


def test_elements_of_an_accelerator_column_sync_when_read():
    found = _found(ON_DEVICE)
    assert (11, "PFL212") in found  # the unique() itself
    assert (13, "PFL204") in found  # int(c)
    assert (16, "PFL205") in found  # counts[cls]: a 0-dim index
    assert (17, "PFL205") in found  # range(n), n = (det[:, 5] == c).sum()


def test_elements_of_a_host_column_do_not():
    assert _found(ON_HOST) == [(10, "PFL203")]  # the one copy

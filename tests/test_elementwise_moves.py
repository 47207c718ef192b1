"""A batch moved to the accelerator one element at a time (`for i in range(len(inputs)):
inputs[i] = inputs[i].cuda()`, `for k, v in meta.items(): meta[k] = v.cuda()`, as
PySlowFast and mmaction move theirs) is on the accelerator after the loop; a batch checked
with `isinstance(inputs, list)` is still a batch."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def found(source: str) -> list[tuple[int, str]]:
    diagnostics = check_source(textwrap.dedent(source).lstrip(), "train_net.py", select=["PFL1", "PFL2"])
    return [(d.location.row, d.code) for d in diagnostics]


LIST_OR_TENSOR = """
    import torch

    def train_epoch(loader, model, optimizer):
        for inputs, labels, meta in loader:
            if isinstance(inputs, (list,)):
                for i in range(len(inputs)):
                    inputs[i] = inputs[i].cuda(non_blocking=True)
            else:
                inputs = inputs.cuda(non_blocking=True)
            for key, val in meta.items():
                meta[key] = val.cuda(non_blocking=True)
            preds = model(inputs)
            rows = torch.arange(preds.shape[0])
            picked = preds[rows, labels.cuda()]
            boxes = meta["boxes"].cpu()
            loss = picked.mean()
            loss.backward()
            optimizer.step()
"""


def test_every_element_moved_makes_the_batch_and_the_model_output_device_tensors():
    assert found(LIST_OR_TENSOR) == [(14, "PFL109"), (15, "PFL203")]


def test_a_batch_moved_in_part_stays_on_the_host():
    partial = LIST_OR_TENSOR.replace(
        "for i in range(len(inputs)):\n" + " " * 20 + "inputs[i] = inputs[i].cuda(non_blocking=True)",
        "inputs[0] = inputs[0].cuda(non_blocking=True)",
    ).replace(
        "for key, val in meta.items():\n" + " " * 16 + "meta[key] = val.cuda(non_blocking=True)",
        'meta["image"] = meta["image"].cuda(non_blocking=True)',
    )
    assert partial != LIST_OR_TENSOR
    assert found(partial) == []

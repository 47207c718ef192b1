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


def test_a_list_of_tensors_checked_with_isinstance_keeps_its_tensors():
    # detectron2's `cat` wrapper asserts its argument is a list: what it returns is still a
    # device tensor, and the boolean mask read of it in a loss is a sync
    assert found("""
        from typing import List

        import torch

        def cat(tensors: List[torch.Tensor], dim: int = 0):
            assert isinstance(tensors, (list, tuple))
            if len(tensors) == 1:
                return tensors[0]
            return torch.cat(tensors, dim)

        class Head(torch.nn.Module):
            def forward(self, logits, labels):
                valid = labels >= 0
                return cat(logits, dim=1)[valid].sum()
    """) == [(14, "PFL214")]


def test_a_branch_for_broken_values_that_raises_when_training_is_not_per_step():
    assert found("""
        import torch

        def filter_proposals(boxes, scores, training):
            valid = torch.isfinite(boxes).all(dim=1) & torch.isfinite(scores)
            if not valid.all():
                if training:
                    raise FloatingPointError("diverged")
                boxes = boxes[valid]
                scores = scores[valid]
            return boxes, scores

        class RPN(torch.nn.Module):
            def forward(self, boxes, scores):
                return filter_proposals(boxes, scores, self.training)
    """) == [(5, "PFL206")]

"""Which files say they use an accelerator (a file that never does computes on the CPU)."""

import pytest

from perflint.engine import _host_only


@pytest.mark.parametrize("source, host_only", [
    (b"import torch\nx = torch.zeros(3)\nprint(x.sum().item())\n", True),
    (b"import torch\n# move it with x.to(device) on a GPU\nx = torch.zeros(3)\n", True),
    (b"import torch\nx = torch.zeros(3).to(dev)\n", False),
    (b"import torch\nx = torch.zeros(3)  # shape\ny = x.cuda()\n", False),
    (b"from lightning import Trainer\n", False),
    (b"t = TRAINER\n", False),
    (b"x = torch.zeros(3,  # shape\n    device=dev)\n", False),  # the pattern spans a comment
    (b"x = torch.zeros(3, device = dev)\n", False),
    (b"backend = 'mps'\n", False),
    (b"mpsolver = 1\n", True),  # a word, not a part of one
    (b"s = '#'; y = x.to(dev)\n", True),  # a `#` in a string reads as a comment, as before
])
def test_accelerator_words_outside_comments(source, host_only):
    assert _host_only(source) is host_only

"""Where tensors live (`Value.device`) and which surely have dimensions (`Value.has_dims`):
the facts the implicit host-to-device copy rule (PFL109) stands on."""

from __future__ import annotations

import pytest

from test_facts_data_movement import _value_of

TRAIN = """
    import torch
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    class Net(torch.nn.Module):
        def forward(self, x):
            return x

    def step(x, cost, device):
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        moved = x.to(device)
        made = torch.zeros(3, device=device)
        chosen = torch.ones(3).to(dev)
        cuda = x.cuda()
        same = torch.arange(4, device=x.device)
        follows = torch.arange(4, device=moved.device)
        host = torch.arange(4).to("cpu")
        out = Net()(moved)
        row, col = linear_sum_assignment(cost)
        rows = torch.as_tensor(row, dtype=torch.int64)
        acc = torch.accelerator.current_accelerator()
        generic = x.to(acc)
        return moved, made, chosen, cuda, same, follows, host, out, rows, generic
"""


@pytest.mark.parametrize("text, device", [
    ("x.to(device)", "accel"),                    # a `device` argument: the accelerator
    ("torch.zeros(3, device=device)", "accel"),
    ("torch.ones(3).to(dev)", "accel"),            # torch.device("cuda" if ... else "cpu")
    ("x.cuda()", "accel"),
    ("torch.arange(4, device=x.device)", None),    # x's device is not known: neither is this
    ("torch.arange(4, device=moved.device)", "accel"),
    ("torch.arange(4).to('cpu')", "cpu"),
    ("Net()(moved)", "accel"),                     # a model given accelerator tensors
    ("torch.as_tensor(row, dtype=torch.int64)", "cpu"),
    ("torch.accelerator.current_accelerator()", "accel"),  # the device source of generic code
    ("x.to(acc)", "accel"),
])
def test_devices_of_moves_factories_and_model_outputs(text, device):
    _, value = _value_of(TRAIN, text)
    assert value.device == device, (text, value)


DIMS = """
    import torch
    import numpy as np

    def step(x, n: int, arr: np.ndarray, ids: list):
        a = torch.arange(n)
        b = torch.cat([a, a])
        c = torch.as_tensor(arr)
        d = torch.tensor([n, n]).long()
        e = a + 1
        f = torch.full_like(a, 3)
        g = torch.as_tensor(3)
        h = torch.zeros(())
        i = torch.tensor(n)
        j = a.long().flip(0)
        k = np.random.permutation(n)[2:5]
        m = np.arange(n)[0]
        return a, b, c, d, e, f, g, h, i, j, k, m
"""


@pytest.mark.parametrize("text, dims", [
    ("torch.arange(n)", True),
    ("torch.cat([a, a])", True),
    ("torch.as_tensor(arr)", True),
    ("torch.tensor([n, n]).long()", True),
    ("e", True),                      # a + 1,
    ("torch.full_like(a, 3)", True),
    ("torch.as_tensor(3)", False),
    ("torch.zeros(())", False),
    ("torch.tensor(n)", False),
    ("a.long().flip(0)", True),
    ("k", True),                      # a slice of np.random.permutation(n)
    ("m", False),                     # one element of an array
])
def test_which_tensors_surely_have_dimensions(text, dims):
    _, value = _value_of(DIMS, text)
    assert value.has_dims is dims, (text, value)

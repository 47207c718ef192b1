"""False positives found by reading findings on training code nobody had tuned on
(pytorch-cifar, vit-pytorch, stylegan2-ada-pytorch, simsiam, barlowtwins, litgpt,
consistency_models, Depth-Anything), each with its twin that must still be reported."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def _found(source: str, filename: str = "model.py") -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, filename, select=["ALL"])}


def test_a_switch_named_after_a_loss_is_a_python_flag_not_the_loss():
    """`forward(self, img, return_aux_loss=None)`: whether to compute the auxiliary loss, a
    bool (None: decide from `self.training`). A `_loss` name makes an unknown value a
    0-dim tensor, but `return_`/`use_`/`has_` in front of it names a switch."""
    source = """
        import torch
        from torch import nn

        def exists(v):
            return v is not None

        def default(v, d):
            return v if exists(v) else d

        class ViT(nn.Module):
            def __init__(self, dim, sample_frac=0.):
                super().__init__()
                self.proj = nn.Linear(dim, dim)
                self.has_decorr_loss = sample_frac > 0.
                self.register_buffer("zero", torch.tensor(0.), persistent=False)

            def forward(self, img, return_aux_loss=None, use_ortho_loss=None):
                return_aux_loss = default(return_aux_loss, self.training) and self.has_decorr_loss
                x = self.proj(img)
                aux = self.zero
                if return_aux_loss:
                    aux = x.pow(2).mean()
                if use_ortho_loss:
                    aux = aux + self.proj.weight.pow(2).mean()
                return x, aux
    """
    assert _found(source) == set()


def test_an_optional_loss_and_a_switch_given_a_tensor_are_still_tensors():
    """The twin: `aux_loss=None` is the loss itself (a tensor when passed), and a switch
    name that data flow shows holding a tensor is read from its value, not its name."""
    source = """
        import torch
        from torch import nn

        class Head(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = nn.Linear(dim, dim)

            def forward(self, x, aux_loss=None):
                y = self.proj(x)
                if aux_loss:
                    y = y + aux_loss
                use_aux_loss = y.mean() > 0
                if use_aux_loss:
                    y = y * 2
                return y
    """
    assert _found(source) == {(11, "PFL206"), (14, "PFL206")}


def test_forward_inputs_named_as_switches_are_flags_but_masks_stay_tensors():
    """BasicSR's `GANLoss.forward(self, input, target_is_real)` and SlowFast's
    `forward(self, outputs, masks, return_all)` test Python bools; `is_pad` may be a mask."""
    source = """
        import torch

        class GANLoss(torch.nn.Module):
            def forward(self, input, target_is_real, return_all, is_pad):
                label = self.real if target_is_real else self.fake
                if not return_all:
                    input = input[:, :1]
                if is_pad.any():
                    input = input.masked_fill(is_pad, 0)
                return (input - label).mean()
    """
    assert _found(source) == {(8, "PFL206")}


def test_a_timed_throttle_and_a_type_check_are_not_per_step_syncs():
    """DALLE2-pytorch's prior trainer: `if type(x) is not torch.Tensor: torch.tensor([x])`
    wraps a number, and what runs once `eval_every_seconds` have passed (or when
    `time.time() - last > interval`) does not run every step. The test itself still syncs."""
    source = """
        import time
        import torch

        def gather(x, device):
            if type(x) is not torch.Tensor:
                x = torch.tensor([x])
            return x.to(device)

        def train(model, loader, optimizer, cfg, device):
            last = time.time()
            for x, y in loader:
                loss = model(x.to(device), y.to(device))
                loss.backward()
                optimizer.step()
                delta = gather(loss.detach(), device)
                if delta > cfg.eval_every_seconds:
                    print(loss.item())
                if time.time() - last > cfg.log_interval:
                    print(f"{loss}")
                    last = time.time()
    """
    assert _found(source) == {(16, "PFL206")}

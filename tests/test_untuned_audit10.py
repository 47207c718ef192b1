"""Findings from reading training code nobody had tuned on (rotation W: sd-scripts,
Time-Series-Library, pytorch-retinanet, pytorch-soft-actor-critic, RepDistiller, SupContrast,
attention-is-all-you-need-pytorch, DeepLabV3Plus-Pytorch, ssd.pytorch, drqv2), each with its
twin."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def _found(source: str, filename: str = "train.py") -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, filename, select=["ALL"])}


def _row(source: str, text: str) -> int:
    return next(n for n, line in enumerate(textwrap.dedent(source).lstrip().splitlines(), 1) if text in line)


# sd-scripts' `sample_images`, called after every optimizer step: it leaves at once unless
# this is the first step and sampling at first was asked for, or the step (epoch) is due.
_SAMPLER = """
    import torch

    def sample_images(args, epoch, steps, vae, latents):
        {guard}
        vae.to("cuda")
        image = vae.decode(latents)
        return image.cpu()

    def train(args, model, vae, loader, optimizer):
        model.cuda()
        for step, batch in enumerate(loader):
            loss = model(batch.cuda()).mean()
            loss.backward()
            optimizer.step()
            sample_images(args, None, step, vae, loss)
"""

_DUE_OR_FIRST = """if steps == 0:
            if not args.sample_at_first:
                return
        else:
            if args.sample_every_n_steps is None and args.sample_every_n_epochs is None:
                return
            if args.sample_every_n_epochs is not None:
                if epoch is None or epoch % args.sample_every_n_epochs != 0:
                    return
            else:
                if steps % args.sample_every_n_steps != 0 or epoch is not None:
                    return"""


def test_a_sampler_that_leaves_unless_due_or_first_is_not_per_step():
    """Both branches of the guard let the rest through only on a due step (or the first):
    the module moves and the copy after it are not per step."""
    source = _SAMPLER.format(guard=_DUE_OR_FIRST)
    assert _sampler_findings(source) == set()


def test_any_reason_to_leave_is_enough():
    """`if steps % n != 0 or epoch is not None: return` throttles like `if steps % n: return`."""
    source = _SAMPLER.format(guard="if steps % args.every != 0 or epoch is not None:\n            return")
    assert _sampler_findings(source) == set()


def test_a_guard_with_a_branch_that_always_continues_is_no_throttle():
    """Twins: a branch that goes on whatever the step (a flag, a test on a rank, `epoch == 0`
    for a whole epoch) leaves the rest per step."""
    for first in ("if args.sample_every_step:", "if rank == 0:", "if epoch == 0:"):
        source = _SAMPLER.format(guard=_DUE_OR_FIRST.replace("if steps == 0:", first))
        assert _sampler_findings(source) == {"PFL107", "PFL203"}, first
    # the due branch itself must throttle: a plain early return on a setting does not
    guard = "if steps == 0:\n            return\n        else:\n            if args.skip:\n                return"
    assert _sampler_findings(_SAMPLER.format(guard=guard)) == {"PFL107", "PFL203"}


def _sampler_findings(source: str) -> set[str]:
    """The codes reported in `sample_images` after its guard: the module move and the copy."""
    first, last = _row(source, 'vae.to("cuda")'), _row(source, "image.cpu()")
    return {code for row, code in _found(source) if first <= row <= last}


# pytorch_wavelets' filter banks (vendored by Time-Series-Library): a helper that builds its
# filters on the device unless it is given tensors, called from an autograd Function with
# the tensors it saved.
_FILTER_BANK = """
    import numpy as np
    import torch

    def sfb1d(lo, hi, g0, g1):
        if not isinstance(g0, torch.Tensor):
            g0 = torch.tensor(np.copy(np.array(g0).ravel()), dtype=torch.float, device=lo.device)
        return torch.nn.functional.conv_transpose2d(lo, g0) + hi

    class SFB1D(torch.autograd.Function):
        @staticmethod
        def forward(ctx, low, high, g0, g1):
            ctx.save_for_backward(g0, g1)
            return sfb1d(low[:, :, None, :], high, g0[:, :, None, :], g1)

        @staticmethod
        def backward(ctx, dy):
            g0, g1 = ctx.saved_tensors
            {rebind}
            return sfb1d(dy[:, :, None, :], dy, g0, g1), None, None, None
"""


def test_a_tensor_check_on_tensors_every_caller_passes_is_decided():
    """`ctx.saved_tensors` are tensors, and so is `g0[:, :, None, :]`: the helper's
    `not isinstance(g0, torch.Tensor)` branch never runs."""
    assert (6, "PFL101") not in _found(_FILTER_BANK.format(rebind=""))


def test_a_tensor_check_on_a_list_some_caller_passes_still_reports():
    """Twin: one caller passes a list of filter taps; the branch builds them every step."""
    assert (6, "PFL101") in _found(_FILTER_BANK.format(rebind="g0 = [0.5, 0.5]"))

"""False positives found by reading findings on training code nobody had tuned on (fairseq,
latent-diffusion, x-transformers), each with its twin that must still be reported."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def _found(source: str, filename: str = "train.py") -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, filename, select=["ALL"])}


def test_a_loss_unpacked_into_several_names_was_a_tuple():
    """A loss is a 0-dim tensor, which cannot be unpacked: `loss, sample_size, logs =
    criterion(model, sample)` returns a tuple, whose first item is the loss and whose
    others (a dict of logs, keyed by strings) nothing says are tensors."""
    source = """
        def train(loader, model, criterion, optimizer):
            for sample in loader:
                sample = sample.cuda()
                loss, sample_size, logging_output = criterion(model, sample)
                optimizer.backward(loss)
                for k in logging_output:
                    print(f"{k}")
                print(loss.item())
    """
    assert _found(source) == {(8, "PFL201")}


def test_a_model_output_unpacked_into_several_names_still_gives_tensors():
    source = """
        def train(loader, model, optimizer):
            for x in loader:
                x = x.cuda()
                logits, feats = model(x)
                logits.sum().backward()
                print(f"{feats}")
    """
    assert _found(source) == {(6, "PFL210")}


def test_the_step_counters_a_training_hook_hands_to_its_loss_are_python_ints():
    source = """
        import torch

        def adopt_weight(weight, global_step, threshold=0, value=0.0):
            if global_step < threshold:
                weight = value
            return weight

        class GANLoss(torch.nn.Module):
            def forward(self, inputs, reconstructions, optimizer_idx, global_step):
                rec = (inputs - reconstructions).abs().mean()
                if optimizer_idx == 0:
                    return rec * adopt_weight(1.0, global_step, threshold=1000)
                return self.disc_loss(inputs, reconstructions)
    """
    assert _found(source, "losses.py") == set()


def test_a_tensor_argument_of_a_loss_forward_is_still_a_tensor():
    source = """
        import torch

        class GANLoss(torch.nn.Module):
            def forward(self, inputs, reconstructions, optimizer_idx, disc_weight):
                rec = (inputs - reconstructions).abs().mean()
                if disc_weight > 0:
                    return rec * disc_weight
                return rec
    """
    assert _found(source, "losses.py") == {(6, "PFL206")}


def test_a_helper_returning_a_modulo_test_throttles_like_the_test():
    source = """
        import torch

        def divisible_by(num, den):
            return (num % den) == 0

        def train(model, loader, optim, validate_every=100):
            for i, batch in enumerate(loader):
                loss = model(batch.cuda())
                loss.backward()
                optim.step()
                if divisible_by(i, validate_every):
                    print(f"loss: {loss.item():.4f}")
    """
    assert _found(source) == set()


def test_a_helper_returning_another_test_does_not_throttle():
    source = """
        import torch

        def past_warmup(num, warmup):
            return num >= warmup

        def train(model, loader, optim, warmup=100):
            for i, batch in enumerate(loader):
                loss = model(batch.cuda())
                loss.backward()
                optim.step()
                if past_warmup(i, warmup):
                    print(f"loss: {loss.item():.4f}")
    """
    assert _found(source) == {(12, "PFL201")}


def test_moving_a_tensor_of_no_elements_copies_nothing():
    """`torch.empty(0).to(tokens)` (a beam search's list of finished hypotheses) has no
    elements: the copy returns at once; a sized one is still a blocking copy."""
    source = """
        import torch

        class Generator(torch.nn.Module):
            def forward(self, tokens, scores):
                finished = torch.empty(0).to(tokens)
                boxes = torch.zeros((0, 4)).to(scores)
                attn = torch.empty(3, 5).to(scores)
                return finished, boxes, attn
    """
    assert _found(source, "generator.py") == {(7, "PFL101")}

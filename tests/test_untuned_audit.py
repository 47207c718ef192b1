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

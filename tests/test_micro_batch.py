"""Which loop is the training loop.

A loop over the slices of one batch (gradient accumulation) is not a loop over the data:
the function that runs it is one step, and the loop calling that function is the training
loop (guided-diffusion's TrainLoop), not an epoch loop around it. A loop that runs the
backward pass itself is the training loop even when it calls a validation loop now and then
(litgpt's fit)."""

from __future__ import annotations

import textwrap

import pytest

from perflint.api import check_source

TRAIN_LOOP = """
    import torch

    class TrainLoop:
        def run_loop(self):
            while self.step < self.total_steps:
                batch = next(self.data)
                self.run_step(batch)
                self.step += 1

        def run_step(self, batch):
            self.forward_backward(batch)
            self.opt.step()
            grad_norm = torch.norm(torch.stack([p.grad.norm() for p in self.params]))
            self.history.append(grad_norm.item())

        def forward_backward(self, batch):
            self.opt.zero_grad()
            {loop}
                loss = self.model(micro.cuda()).mean()
                loss.backward()
"""
MICRO_BATCHES = [
    "for i in range(0, batch.shape[0], self.microbatch):\n                micro = batch[i : i + self.microbatch]",
    "for micro in batch.split(self.microbatch):",
    "for i in range(0, len(batch), 4):\n                micro = batch[i:i + 4]",
]


def rows(source: str) -> list[int]:
    found = check_source(textwrap.dedent(source).lstrip(), "train_util.py", select=["PFL201"])
    return [d.location.row for d in found]


@pytest.mark.parametrize("loop", MICRO_BATCHES)
def test_the_loop_calling_a_micro_batch_step_is_the_training_loop(loop):
    assert rows(TRAIN_LOOP.format(loop=loop)) == [14]


EPOCHS = """
    import torch

    class Trainer:
        def fit(self):
            for epoch in range(self.epochs):
                self.train_one_epoch()
                print(f"epoch {{epoch}}: {{self.val_loss.item()}}")

        def train_one_epoch(self):
            {loop}
                loss = self.model(micro.cuda()).mean()
                loss.backward()
                self.opt.step()
"""


def test_a_loop_calling_a_loop_over_the_data_is_an_epoch_loop():
    assert rows(EPOCHS.format(loop="for micro in self.loader:")) == []
    # the twin: one call slices one batch, so the loop calling it runs every step
    assert rows(EPOCHS.format(loop="for micro in self.batch.split(8):")) == [7]


VALIDATES = """
    import torch

    def validate(model, loader):
        losses = [model(batch) for batch in loader]
        return torch.stack(losses).mean()

    def train_one_epoch(model, loader, optimizer):
        for batch in loader:
            model(batch).backward()
            optimizer.step()

    def fit(model, optimizer, train_iterator, val_loader, train_loader):
        step = 0
        while step < 1000:
            {body}
            if step % 100 == 0:
                validate(model, val_loader)
            print(f"{{model.scale.item()}}")
            step += 1
"""


def test_a_training_loop_that_validates_every_n_steps_is_still_the_training_loop():
    # litgpt's fit(): the validation loop it calls now and then does not make it an epoch loop
    body = "loss = model(next(train_iterator))\n            loss.backward()\n            optimizer.step()"
    assert rows(VALIDATES.format(body=body)) == [20]


def test_an_epoch_loop_that_calls_the_training_and_the_validation_stays_cold():
    assert rows(VALIDATES.format(body="train_one_epoch(model, train_loader, optimizer)")) == []


def test_a_gradient_accumulation_gate_runs_every_optimizer_step():
    # yolov7 / Swin: `if (i + 1) % accumulate == 0: scaler.step(optimizer)` is the step;
    # `if i % 100 == 0: print(...)` beside it is logging now and then
    found = check_source(textwrap.dedent("""
        import torch

        def train(model, loader, optimizer, scaler, accumulate, device):
            for i, (x, y) in enumerate(loader):
                loss = model(x.to(device), y.to(device))
                scaler.scale(loss).backward()
                if (i + 1) % accumulate == 0:
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
                if i % 100 == 0:
                    print(loss.item())
    """).lstrip(), "train.py")
    assert [(d.location.row, d.code) for d in found] == [(8, "PFL230")]


def test_lightning_step_end_hooks_run_every_step_but_chosen_batches_do_not():
    found = check_source(textwrap.dedent("""
        import torch
        import pytorch_lightning as pl

        class MriModule(pl.LightningModule):
            def validation_step_end(self, val_logs):
                for i, batch_idx in enumerate(val_logs["batch_idx"]):
                    if batch_idx in self.val_log_indices:
                        self.logger.experiment.add_image("target", val_logs["target"][i], self.global_step)
                slice_num = int(val_logs["slice_num"][0].cpu())
                return slice_num
    """).lstrip(), "mri_module.py")
    assert [(d.location.row, d.code) for d in found] == [(9, "PFL203")]


def test_the_hot_path_names_an_inference_loop_for_what_it_is():
    found = check_source(textwrap.dedent("""
        import torch

        def generate(model, tokens, steps):
            for _ in range(steps):
                logits = model(tokens)
                tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], 1)
                if (tokens[:, -1] == 0).all():
                    break
    """).lstrip(), "generate.py")
    assert [d.extra["hot_path"] for d in found] == [["generate.py:4 loop that runs the model in `generate`"]]

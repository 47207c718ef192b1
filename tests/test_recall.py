"""Syncs hidden behind aliases, variables, attributes, returns and helper calls are found.

Each case lists (line, code) pairs that must be reported; other findings are allowed only if
they are also listed.
"""

from __future__ import annotations

import textwrap

import pytest

from perflint.api import check_source

CASES = {
    "a loop that may continue before its final return runs every step": (
        """
        import torch

        def first_good(model, loader):
            for images, _ in loader:
                out = model(images.cuda())
                if out.isnan().any():
                    continue
                return out.sum().item()
        """,
        {(6, "PFL206")},
    ),
    "a parameter that a hot call passes, or that a caller passes with **kwargs, may be anything": (
        """
        import torch

        class Head(torch.nn.Module):
            def forward(self, x, cfg):
                a = self.assign(x, mode=cfg.mode)
                b = self.report(x, **cfg.options)
                return a, b

            def assign(self, x, mode="gpu"):
                if mode == "cpu":
                    x = x.cpu()
                return x

            def report(self, x, debug=False):
                if debug:
                    print(x.sum().item())
                return x
        """,
        {(11, "PFL203"), (16, "PFL201")},
    ),
    "masks joined with stack or cat, and a list of masks appended in a loop, are masks": (
        """
        import torch

        def build_targets(targets, preds):
            gxy = targets[:, 2:4].cuda()
            j, k = ((gxy % 1 < 0.5) & (gxy > 1)).T
            j = torch.stack((torch.ones_like(j), j, k))
            t = targets.cuda().repeat((3, 1, 1))[j]
            fg_masks = []
            for p in preds:
                fg_masks.append(p.cuda() > 0)
            fg = torch.cat(fg_masks, 0)
            return t, preds[0].cuda()[fg]

        for x, y in loader:
            build_targets(y, model(x))
        """,
        {(7, "PFL214"), (12, "PFL214")},
    ),
    "a while loop over steps counted down from a variable is a training loop": (
        """
        import torch

        def train(model, it, opt, steps):
            remaining = steps
            while remaining:
                remaining -= 1
                loss = model(next(it).cuda())
                loss.backward()
                opt.step()
                print(loss.item())
        """,
        {(10, "PFL201")},
    ),
    "a step function called in a loop, with the model loaded outside it, is a step": (
        """
        import torch

        def step(model, x):
            y = model(x)
            return y.sum().item()

        def main(paths):
            model = torch.load(paths[0])
            for x in batches:
                step(model, x.cuda())
        """,
        {(5, "PFL201")},
    ),
    "bookkeeping about losses called from the training loop is hot through its caller": (
        """
        import torch

        class LossAwareSampler:
            def update_with_local_losses(self, local_ts, local_losses):
                return [x.item() for x in local_losses]

        sampler = LossAwareSampler()
        for x, t in loader:
            losses = model(x.cuda(), t.cuda())
            sampler.update_with_local_losses(t, losses.detach())
        """,
        {(5, "PFL201")},
    ),
    "a flag reassigned to a per-step test no longer throttles": (
        """
        import torch

        def train_one_epoch(model, loader, verbose):
            for i, (x, y) in enumerate(loader):
                loss = model(x.cuda(), y.cuda())
                show = i % 10 == 0
                show = verbose
                if show:
                    print(loss.item())
        """,
        {(9, "PFL201")},
    ),
    "a step-counter test joined with `or` guards code that can run every step": (
        """
        import torch

        def run(model, loader, verbose):
            for batch_i, (im, targets) in enumerate(loader):
                preds = model(im.cuda())
                if verbose or batch_i < 3:
                    print(preds.sum().item())
        """,
        {(7, "PFL201")},
    ),
    "import aliases": (
        """
        import torch as T
        from torch import nonzero as nz
        from torch import Tensor

        for x, y in loader:
            out = model(x)
            a = T.nonzero(out)
            b = nz(out > 0)
            c = Tensor.item(out.sum())
            d = T.Tensor.item(out.mean())
        """,
        {(7, "PFL211"), (8, "PFL211"), (9, "PFL201"), (10, "PFL201")},
    ),
    "data flow through variables and unpacking": (
        """
        import torch

        for images, labels in train_loader:
            logits = model(images)
            probs = logits.softmax(-1)
            values, indices = probs.max(dim=1)
            confident = values > 0.9
            chosen = logits[confident]
            best = indices
            total = best.sum()
            if total > 3:
                pass
        """,
        {(8, "PFL214"), (11, "PFL206")},
    ),
    "attributes set in __init__ and in forward": (
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("threshold", torch.zeros(()))
                self.proj = nn.Linear(4, 4)

            def forward(self, x):
                h = self.proj(x)
                self.keep = h > self.threshold
                if self.threshold.abs() > 1:
                    h = h / 2
                return h[self.keep]
        """,
        {(13, "PFL206"), (15, "PFL214")},
    ),
    "returns of helper functions": (
        """
        import torch

        def valid_mask(t):
            return torch.isfinite(t) & (t > 0)

        def scores(model, x):
            return model(x).sigmoid()

        for x, y in loader:
            s = scores(model, x)
            picked = s[valid_mask(s)]
        """,
        {(11, "PFL214")},
    ),
    "helpers called from the loop are hot, parameters carry tensors": (
        """
        import torch

        def log_metrics(loss, logits, labels):
            acc = (logits.argmax(1) == labels).float().mean()
            print(acc.item(), loss.item())

        def train(model, loader, optimizer):
            for batch in loader:
                x, y = batch
                logits = model(x)
                loss = torch.nn.functional.cross_entropy(logits, y)
                loss.backward()
                optimizer.step()
                log_metrics(loss, logits, y)
        """,
        {(5, "PFL201"), (5, "PFL201")},
    ),
    "methods called from forward": (
        """
        import torch
        import torch.nn as nn

        class Detector(nn.Module):
            def filter(self, boxes, scores):
                keep = torch.where(scores > 0.5)
                return boxes[keep]

            def forward(self, boxes, scores):
                return self.filter(boxes, scores)
        """,
        {(6, "PFL211")},
    ),
    "loop forms: enumerate/tqdm, while with next(), comprehensions": (
        """
        import torch
        from tqdm import tqdm

        for i, (x, y) in enumerate(tqdm(val_loader)):
            out = model(x)
            print(out.sum().item())

        it = iter(loader)
        while True:
            batch = next(it)
            loss = model(batch).mean()
            loss.backward()
            value = loss.item()

        totals = [model(x).sum().item() for x, _ in loader]
        """,
        {(6, "PFL201"), (13, "PFL201"), (15, "PFL201")},
    ),
    "lightning and transformers entry points": (
        """
        import torch
        import lightning as L

        class Lit(L.LightningModule):
            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = torch.nn.functional.mse_loss(self(x), y)
                self.log("loss", loss.item())
                return loss

        class MyTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False):
                outputs = model(**inputs)
                if torch.isnan(outputs.loss):
                    print("nan")
                return outputs.loss
        """,
        {(8, "PFL201"), (14, "PFL206")},
    ),
    "closures passed to optimizer.step": (
        """
        import torch

        for x, y in loader:
            def closure():
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                print(loss.item())
                return loss
            optimizer.step(closure)
        """,
        {(8, "PFL201")},
    ),
    "training loop at module level of a script": (
        """
        import torch
        from torch.utils.data import DataLoader

        dl = DataLoader(dataset, batch_size=32)
        net = build()
        for epoch in range(3):
            for inputs, targets in dl:
                inputs, targets = inputs.cuda(), targets.cuda()
                loss = net(inputs).sub(targets).pow(2).mean()
                loss.backward()
                if torch.isnan(loss):
                    break
                running = loss.item()
        """,
        {(11, "PFL206"), (13, "PFL201")},
    ),
    "shape dispatch and loops over layers run every step": (
        """
        import torch

        class Loss(torch.nn.Module):
            def forward(self, input, target):
                loss = (input - target).abs()
                if input.ndim == 4:
                    print("loss", loss.mean().item())
                for i, layer in enumerate(self.layers):
                    if i == 0:
                        scale = input.abs().max().item()
                return loss.mean()
        """,
        {(7, "PFL201"), (10, "PFL201")},
    ),
    "schedulers, metrics and loss methods run every step": (
        """
        import torch

        class MaskScheduler:
            def step(self, model_output: torch.Tensor, timestep, sample: torch.Tensor):
                active = sample == self.mask_token_id
                if active.any():
                    pass
                return sample

        class MyAccuracy(Metric):
            def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
                if torch.unique(target).numel() > 10:
                    raise ValueError("too many classes")

        class PairLoss(torch.nn.Module):
            def _compute_loss(self, pos_mask):
                if pos_mask.bool().any():
                    return 1

        def ctc_loss_kd(log_probs: torch.Tensor, targets: torch.Tensor):
            return targets.argmax(-1).cpu()
        """,
        {(6, "PFL206"), (12, "PFL212"), (17, "PFL206"), (21, "PFL203")},
    ),
    "a step run through a helper makes its loop a training loop": (
        """
        import torch

        def next_token(model, x):
            return model(x)[:, -1].argmax(-1, keepdim=True)

        def generate(model, tokens, max_new, stop_id):
            done = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)
            for _ in range(max_new):
                nxt = next_token(model, tokens)
                tokens = torch.cat([tokens, nxt], dim=-1)
                done |= nxt.squeeze(-1) == stop_id
                if done.all():
                    break
            return tokens

        class Trainer:
            def fit_batch(self, batch):
                loss = self.model(batch).sum()
                loss.backward()
                for param in self.model.parameters():
                    if not torch.isfinite(param.grad).all():
                        param.grad = None
                self.opt.step()

            def fit(self, train_set):
                for batch in train_set:
                    self.fit_batch(batch)
        """,
        {(12, "PFL206"), (21, "PFL206")},
    ),
    "subclass overrides and mixins called from the base": (
        """
        import torch

        class DetLoss:
            def __call__(self, preds, batch):
                return self.loss(preds, batch)

            def loss(self, preds: torch.Tensor, batch):
                return preds.sum()

        class SegLoss(DetLoss):
            def loss(self, preds: torch.Tensor, batch):
                if (preds > 0).any():
                    return preds.sum()
                return preds.mean()

        class Mixin:
            def forward_cached(self, feats, labels):
                return self.calculate_loss([self.model(f) for f in feats], labels)

        class CachedLoss(Mixin, torch.nn.Module):
            def forward(self, feats, labels):
                return self.forward_cached(feats, labels)

            def calculate_loss(self, reps, labels=None):
                base_loss = torch.nn.functional.cross_entropy(torch.cat(reps), labels)
                self.last = base_loss.detach().item()
                return base_loss
        """,
        {(12, "PFL206"), (26, "PFL201")},
    ),
    "a batch moved with a dict comprehension": (
        """
        import torch

        def train(model, loader, optimizer):
            for batch in loader:
                batch = {k: v.cuda() for k, v in batch.items()}
                labels = batch["labels"]
                valid = labels[labels != -100]
                n = int(labels.max())
                model(**batch).loss.backward()
                optimizer.step()
        """,
        {(7, "PFL214"), (8, "PFL204")},
    ),
    "device strings, compiled models and decoding methods": (
        """
        import torch
        from torch.utils.data import DataLoader

        device = "cuda" if torch.cuda.is_available() else "cpu"
        train_dataloader = DataLoader(training_data, batch_size=64)
        model = torch.compile(Net().to(device))

        def greedy_decode(model, memory, max_len, end_symbol):
            ys = torch.ones(1, 1, dtype=torch.long, device=device)
            for _ in range(max_len - 1):
                out = model.decode(ys, memory)
                next_word = out[:, -1].argmax(1).item()
            return ys

        for X, y in train_dataloader:
            X, y = X.to(device), y.to(device)
            loss = model(X).sub(y).abs().mean()
            loss.backward()
            total = loss.item()
        """,
        {(5, "PFL103"), (5, "PFL104"), (12, "PFL201"), (19, "PFL201")},
    ),
    "a CPU smoke test does not decide where a loss module's tensors live": (
        """
        import torch
        import torch.nn as nn


        class DiceLoss(nn.Module):
            def forward(self, pred, target):
                num_classes = torch.unique(target).numel()
                return pred.sum() / num_classes


        def ohem_loss(pred, target, device):
            hard = pred[target > 0]
            return hard.mean()


        if __name__ == "__main__":
            p = torch.randn(2, 3)
            t = torch.randint(0, 3, (2,))
            print(DiceLoss()(p, t), ohem_loss(p, t, "cpu"))
        """,
        {(7, "PFL212"), (12, "PFL214")},
    ),
    # Hooks and callbacks: frameworks call them every iteration; no call in the file does.
    # Per-epoch and per-run methods, and throttled bodies, stay silent.
    "mmengine hook: after_train_iter runs every iteration": (
        """
        from mmengine.hooks import Hook

        class LossHook(Hook):
            def __init__(self, interval=50):
                self.interval = interval
                self.losses = []

            def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
                self.losses.append(outputs["loss"].detach().item())
                if self.every_n_train_iters(runner, self.interval):
                    runner.logger.info(f"loss {outputs['loss'].item():.4f}")

            def after_train_epoch(self, runner):
                runner.logger.info(f"loss {runner.outputs['loss'].detach().item():.4f}")

            def after_run(self, runner):
                runner.logger.info(f"loss {runner.outputs['loss'].detach().item():.4f}")
        """,
        {(9, "PFL201")},
    ),
    "mmcv hook: after_iter runs every iteration": (
        """
        from mmcv.runner import HOOKS, Hook

        @HOOKS.register_module()
        class LossCheckHook(Hook):
            def after_iter(self, runner):
                if not runner.outputs["loss"].isfinite().item():
                    runner.logger.warning("non-finite loss")

            def after_epoch(self, runner):
                if not runner.outputs["loss"].isfinite().item():
                    runner.logger.warning("non-finite loss")
        """,
        {(6, "PFL201")},
    ),
    "detectron2 hook: after_step runs every step": (
        """
        import torch
        from detectron2.engine import HookBase

        class GradNormHook(HookBase):
            def __init__(self, period=20):
                self._period = period

            def after_step(self):
                norms = [p.grad.norm() for p in self.trainer.model.parameters() if p.grad is not None]
                total = torch.stack(norms).norm()
                self.trainer.storage.put_scalar("grad_norm", total.item())
                next_iter = self.trainer.iter + 1
                if next_iter % self._period == 0 or next_iter == self.trainer.max_iter:
                    print(torch.stack(norms).max().item())

            def after_train(self):
                print(torch.stack([p.norm() for p in self.trainer.model.parameters()]).norm().item())
        """,
        {(11, "PFL201")},
    ),
    "Lightning callback and LightningModule hooks run every batch": (
        """
        import lightning as L
        import torch

        class LossHistory(L.Callback):
            def __init__(self):
                self.losses = []

            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                self.losses.append(outputs["loss"].item())
                if trainer.global_step % 100 == 0:
                    print(outputs["loss"].item())

            def on_train_epoch_end(self, trainer, pl_module):
                print(torch.stack(pl_module.epoch_losses).mean().item())

        class Classifier(L.LightningModule):
            def on_before_optimizer_step(self, optimizer):
                norms = [p.grad.norm() for p in self.parameters() if p.grad is not None]
                self.log("grad_norm", torch.stack(norms).norm().item())

            def on_train_epoch_end(self):
                print(torch.stack(self.epoch_losses).mean().item())
        """,
        {(9, "PFL201"), (19, "PFL201")},
    ),
    "Hugging Face TrainerCallback: on_pre_optimizer_step runs every step": (
        """
        import torch
        from transformers import TrainerCallback

        class GradNormCallback(TrainerCallback):
            def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
                norms = [p.grad.norm() for p in model.parameters() if p.grad is not None]
                state.log_history.append({"grad_norm": torch.stack(norms).norm().item()})

            def on_step_end(self, args, state, control, model=None, **kwargs):
                if control.should_log:
                    print(torch.stack([p.norm() for p in model.parameters()]).norm().item())

            def on_epoch_end(self, args, state, control, model=None, **kwargs):
                print(torch.stack([p.norm() for p in model.parameters()]).norm().item())

            def on_log(self, args, state, control, logs=None, model=None, **kwargs):
                logs["weight_norm"] = torch.stack([p.norm() for p in model.parameters()]).norm().item()
        """,
        {(7, "PFL201")},
    ),
    "ignite: the process function and per-iteration handlers": (
        """
        import torch
        from ignite.engine import Engine, Events

        def run(model, optimizer, loader, max_epochs):
            def train_step(engine, batch):
                x, y = batch
                loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                return loss.item()

            trainer = Engine(train_step)

            @trainer.on(Events.ITERATION_COMPLETED)
            def log_grad_norm(engine):
                norms = [p.grad.norm() for p in model.parameters() if p.grad is not None]
                engine.state.metrics["grad_norm"] = torch.stack(norms).norm().item()

            @trainer.on(Events.ITERATION_COMPLETED(every=100))
            def log_weights(engine):
                print(torch.stack([p.norm() for p in model.parameters()]).norm().item())

            def check_weights(engine):
                assert torch.isfinite(torch.stack([p.norm() for p in model.parameters()])).all()

            def epoch_summary(engine):
                print(torch.stack([p.norm() for p in model.parameters()]).norm().item())

            trainer.add_event_handler(Events.ITERATION_STARTED, check_weights)
            trainer.add_event_handler(Events.EPOCH_COMPLETED, epoch_summary)
            trainer.run(loader, max_epochs=max_epochs)
        """,
        {(11, "PFL201"), (18, "PFL201"), (25, "PFL207")},
    ),
    "a trainer subclass: the base class's loop calls after_iter every iteration": (
        """
        import torch
        from yolox.core import Trainer

        class NormTrainer(Trainer):
            def after_iter(self):
                super().after_iter()
                self.norms.append(torch.stack([p.norm() for p in self.model.parameters()]).norm().item())

            def after_epoch(self):
                print(torch.stack([p.norm() for p in self.model.parameters()]).norm().item())
        """,
        {(7, "PFL201")},
    ),
    "hooks called through a list in the training loop": (
        """
        import torch

        class HookBase:
            def on_batch_done(self, loss):
                pass

            def on_train_done(self, loss):
                pass

        class LossHistoryHook(HookBase):
            def __init__(self):
                self.history = []

            def on_batch_done(self, loss):
                self.history.append(loss.item())

            def on_train_done(self, loss):
                print(loss.item())

        class Recorder:  # not a hook: its method of the same name is not called through the list
            def on_batch_done(self, loss):
                print(loss.item())

        def train(model, loader, optimizer, hooks):
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                for hook in hooks:
                    hook.on_batch_done(loss.detach())
            for hook in hooks:
                hook.on_train_done(loss.detach())
        """,
        {(15, "PFL201")},
    ),
    "hooks called by name with getattr (mmengine's call_hook) get the runner": (
        """
        import torch

        class MessageHub:
            def __init__(self):
                self.scalars = {}

            def update_scalar(self, key, value):
                if isinstance(value, torch.Tensor):
                    value = value.item()
                self.scalars[key] = value

        class Hook:
            def after_train_iter(self, runner, outputs=None):
                pass

        class RuntimeInfoHook(Hook):
            def after_train_iter(self, runner, outputs=None):
                for key, value in outputs.items():
                    runner.message_hub.update_scalar(key, value)

        class Runner:
            def __init__(self, model, loader, optimizer, hooks=()):
                self.model = model
                self.loader = loader
                self.optimizer = optimizer
                self.message_hub = MessageHub()
                self.hooks = list(hooks)

            def call_hook(self, fn_name, **kwargs):
                for hook in self.hooks:
                    getattr(hook, fn_name)(self, **kwargs)

            def train(self):
                for x, y in self.loader:
                    loss = torch.nn.functional.mse_loss(self.model(x.cuda()), y.cuda())
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    self.call_hook("after_train_iter", outputs={"loss": loss.detach()})
                self.call_hook("after_run")
        """,
        {(9, "PFL201")},
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hidden_syncs_are_found(name):
    source, expected = CASES[name]
    found = check_source(textwrap.dedent(source).lstrip(), "snippet.py", select=["ALL"])
    got = {(d.location.row, d.code) for d in found}
    assert expected <= got, f"missing {sorted(expected - got)}; got {sorted(got)}"
    relevant_codes = {code for _, code in expected}
    extra = {(row, code) for row, code in got - expected if code in relevant_codes}
    assert not extra, f"unexpected {sorted(extra)}"

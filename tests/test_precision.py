"""Look-alikes that must stay silent, whatever rules are enabled (`--select ALL`).

A linter that cries wolf gets switched off: each snippet here is code that looks like a
host-device sync but is not one (numpy, pandas, Python values, shapes, CPU tensors), or is
one but does not run every step.
"""

from __future__ import annotations

import textwrap

import pytest

from perflint.api import check_source

SILENT = {
    "container methods on what a module method returns: a dict of losses, keyed by strings": """
        import torch

        def add_prefix(inputs, prefix):
            outputs = dict()
            for name, value in inputs.items():
                outputs[f"{prefix}.{name}"] = value
            return outputs

        class Depther(torch.nn.Module):
            def forward_train(self, img, depth_gt):
                losses = dict()
                loss_decode = self.decode_head.forward_train(img, depth_gt)
                losses.update(add_prefix(loss_decode, "decode"))
                return losses
    """,
    "a loop whose body always returns runs once (a throughput measurement on one batch)": """
        import time
        import torch

        @torch.no_grad()
        def throughput(data_loader, model):
            for idx, (images, _) in enumerate(data_loader):
                images = images.cuda(non_blocking=True)
                for i in range(30):
                    model(images)
                torch.cuda.synchronize()
                tic = time.time()
                return images.shape[0] / tic
    """,
    "batch parts a loop over enumerate(loader) never moves stay in host memory": """
        import torch

        def scale(im1_shape, boxes, im0_shape):
            gain = min(im1_shape[0] / im0_shape[0], im1_shape[1] / im0_shape[1])
            return boxes / gain

        def run(model, loader, device):
            for batch_i, (im, targets, shapes) in enumerate(loader):
                im = im.to(device)
                preds = model(im)
                for si, pred in enumerate(preds):
                    scale(im[si].shape[1:], pred, shapes[si][0])
    """,
    "a branch on a parameter that every hot call leaves at its default does not run": """
        import torch

        class Head(torch.nn.Module):
            def forward(self, x, labels):
                for i in range(x.shape[0]):
                    try:
                        out = self.assign(x[i], labels[i])
                    except RuntimeError:
                        torch.cuda.empty_cache()
                        out = self.assign(x[i], labels[i], "cpu")
                return out

            def assign(self, x, labels, mode="gpu", debug=False):
                if mode == "cpu":
                    x = x.cpu()
                if debug:
                    print(x.sum().item())
                return x + 1
    """,
    "a list of float tensors joined with cat is not a mask": """
        import torch

        def gather(preds):
            parts = []
            for p in preds:
                parts.append(p.cuda() * 2.0)
            scores = torch.cat(parts, 0)
            return preds[0].cuda()[scores.long()]

        for x, y in loader:
            gather(model(x))
    """,
    "a retry loop runs a few times, not every step": """
        import torch

        def profile(model, force_cpu):
            x = torch.ones(1, 3, 224, 224, device="cuda")
            model(x)
            return x.sum().item()

        def profile_model(model):
            retries = 2
            while retries:
                retries -= 1
                try:
                    return profile(model, force_cpu=not retries)
                except RuntimeError:
                    pass
    """,
    "a loop over checkpoints runs a whole program per checkpoint, not a step": """
        import torch

        def run(weights, device):
            model = torch.load(weights, map_location=device)
            im = torch.zeros(1, 3, 64, 64, device=device)
            y = model(im)
            print(y.sum().item())

        def main(opt):
            for weight in opt.weights:
                run(weight, opt.device)
    """,
    "bookkeeping about losses is not a loss (nothing here calls it every step)": """
        import torch as th

        class LossAwareSampler:
            def update_with_local_losses(self, local_ts, local_losses):
                sizes = [x.item() for x in local_ts]
                return max(sizes)
    """,
    "a logging flag holding a throttled test throttles what it guards": """
        import torch

        def train_one_epoch(model, loader, optimizer, log_every, num_batches):
            for i, (x, y) in enumerate(loader):
                loss = model(x.cuda(), y.cuda())
                loss.backward()
                optimizer.step()
                last_batch = i + 1 == num_batches
                is_console_step = (i % log_every == 0) or last_batch
                is_metric_step = (i % 10 == 0) or is_console_step
                if is_metric_step:
                    print(loss.item())
    """,
    "plots of the first batches under another condition run a few times, not every step": """
        import torch

        def run(model, loader, plots):
            for batch_i, (im, targets) in enumerate(loader):
                im = im.cuda()
                preds = model(im)
                if plots and batch_i < 3:
                    plot(im.cpu().numpy(), preds.tolist())
    """,
    "isinstance with paths and images narrows a name to a host object": """
        from pathlib import Path
        from PIL import Image
        import torch

        class AutoShape(torch.nn.Module):
            def forward(self, ims):
                for i, im in enumerate(ims):
                    if isinstance(im, (str, Path)):
                        im = Image.open(str(im))
                    elif isinstance(im, Image.Image):
                        print(f"image {im}")
                return ims
    """,
    "numpy look-alikes": """
        import numpy as np
        import torch

        for x, y in loader:
            a = np.asarray(x.shape)
            b = np.zeros(4)
            v = b.item() if b.size == 1 else b.sum().item()
            u = np.unique(b)
            nz = b.nonzero()
            picked = b[b > 0]
            lst = b.tolist()
            if (b > 0).any():
                pass
            model(x)
    """,
    "pandas look-alikes": """
        import pandas as pd
        import torch

        frame = pd.read_csv("labels.csv")
        for x, y in loader:
            classes = frame["label"].unique()
            first = frame["label"].iloc[0].item()
            names = frame["name"].tolist()
            model(x)
    """,
    "list and dict methods": """
        import torch

        history = []
        stats = {}
        for x, y in loader:
            out = model(x)
            history.append(1.0)
            i = history.index(1.0)
            n = history.count(1.0)
            for key, value in stats.items():
                pass
            stats.pop("a", None)
            if history:
                pass
    """,
    "once after the loop, once per epoch": """
        import torch

        for epoch in range(10):
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            print(f"epoch {epoch}: {loss.item():.3f}")
            if loss < 0.1:
                break
        final = loss.item()
        print(loss)
    """,
    "shape and metadata checks in forward": """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x, mask=None):
                assert x.dim() == 4, "expected NCHW"
                assert x.shape[1] == 3
                assert isinstance(x, torch.Tensor)
                if torch.numel(x) > 10 and x.size(0) > 1:
                    x = x * 2
                if x.dtype == torch.float16 or x.is_cuda or x.device.type == "cuda":
                    x = x.float()
                if mask is not None and self.training and x.requires_grad:
                    x = x * mask
                n = len(x) + x.shape[0] + x.size(0) + x.dim() + x.numel()
                print(x.shape, x.dtype)
                return x.view(n, -1)
    """,
    "mask write of a Python number and other non-syncing forms": """
        import torch

        for x, y in loader:
            out = model(x)
            out[y == 0] = 0.0
            out[torch.isnan(out)] = float("-inf")
            out = out.masked_fill(y == 1, 0)
            out = torch.where(out > 0, out, 0.0)
            rep = out.repeat_interleave(2, dim=0)
            values, indices = out.max(dim=1)
            top = out.topk(3, dim=1).indices
            cpu_copy = out.to("cpu", non_blocking=True)
    """,
    "setup code runs once": """
        import torch
        import torch.nn as nn

        model = nn.Linear(4, 2)
        model.cuda()
        model.to("cuda")
        weights = torch.ones(3).tolist()
        scale = torch.tensor(2.0).item()

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("w", torch.ones(3))
                self.n = int(self.w.sum().item())
                if self.w.sum() > 0:
                    self.extra = nn.Linear(3, 3)

            def reset_parameters(self):
                print(self.w)
    """,
    "CPU random numbers in a transform": """
        import torch
        import torch.nn as nn

        class RandomFlip(nn.Module):
            def __init__(self, p=0.5):
                super().__init__()
                self.p = p

            def forward(self, img):
                if torch.rand(1) < self.p:
                    img = img.flip(-1)
                angle = float(torch.empty(1).uniform_(-10.0, 10.0).item())
                k = int(torch.randint(0, 4, (1,)).item())
                return img
    """,
    "logging every N steps, errors, raise messages": """
        import torch

        for step, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            if step % 100 == 0:
                print(f"step {step}: {loss.item():.4f} {loss}")
            if (step + 1) % 50 == 0:
                print(loss.tolist())
            try:
                out = model(x)
            except RuntimeError:
                print(loss.item())
                raise
            if step > 1000:
                print(loss.item())
                break
    """,
    "lazy initialisation runs once per key": """
        import torch

        class MyAdam(torch.optim.Optimizer):
            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        state = self.state[p]
                        if len(state) == 0:
                            state["exp_avg"] = torch.zeros(p.shape).to(p)
                            state["step"] = torch.tensor(0.0).item()
                        if "max_sq" not in state:
                            state["max_sq"] = torch.zeros([]).to(p.device)
    """,
    "a dict literal of CPU tensors (augmentation tables)": """
        import torch
        import torch.nn as nn

        class RandAugment(nn.Module):
            def _space(self, bins):
                return {"Shear": (torch.linspace(0.0, 0.3, bins), True), "Identity": (torch.tensor(0.0), False)}

            def forward(self, img):
                op_meta = self._space(10)
                for name in ("Shear", "Identity"):
                    magnitudes, signed = op_meta[name]
                    magnitude = float(magnitudes[3].item()) if magnitudes.ndim > 0 else 0.0
                return img
    """,
    "raise messages are built only on failure": """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x):
                if x.shape[0] == 0:
                    raise ValueError(f"empty batch: {x}")
                return x
    """,
    "flags named like losses are flags": """
        import torch

        class ClipLoss(torch.nn.Module):
            def __init__(self, local_loss=False):
                super().__init__()
                self.local_loss = local_loss

            def forward(self, a, b):
                if self.local_loss:
                    return (a * b).sum()
                return (a - b).sum()

        class Trainer:
            def _get_logps(self, model, batch, compute_aux_loss=False):
                outputs = model(**batch)
                if compute_aux_loss:
                    return outputs.log_probs, outputs.aux_loss
                return outputs.log_probs, None

            def compute_loss(self, model, inputs):
                version = self.model_version_fn()
                if version > self.max_staleness:
                    pass
                logps, aux = self._get_logps(model, inputs, compute_aux_loss=self.aux_enabled)
                return -logps.mean()
    """,
    "predicates of tensor libraries return bools": """
        import torch
        from kornia.core.utils import is_compiling
        from kornia.augmentation.utils.helpers import _adapted_rsampling

        class Jiggle(torch.nn.Module):
            def forward(self, x, batch_size, device):
                if not is_compiling():
                    x = x * 2
                factor = _adapted_rsampling((batch_size,), self.sampler, False)
                return x, factor.to(device=device)
    """,
    "CPU tensors stay on the CPU through dtype casts, legacy constructors and cat": """
        import torch

        class RandomApply(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.weights = torch.ones(4).to(torch.get_default_dtype())

            def forward(self, x, ids, groups):
                if self.weights.sum() == 0:
                    return x
                picked = torch.multinomial(self.weights, 1)
                counts = torch.LongTensor(ids)
                index = torch.cat([torch.tensor(range(n)) for n in groups])
                return x[picked], counts.sum().item(), index.cpu().split(groups)
    """,
    "shape dispatch runs every step but step counters do not": """
        import torch

        def train(model, loader, opt):
            for i, (x, y) in enumerate(loader):
                loss = model(x.cuda(), y.cuda())
                loss.backward()
                opt.step()
                if i == 0:
                    print(loss.item())
                if i < 3:
                    print(loss.cpu())

        def plot_val_batches(model, dataloader, device):
            with torch.no_grad():
                for ni, batch in zip(range(3), dataloader):
                    img = batch["img"].to(device).float() / 255
                    pictures.append(model(img).cpu().numpy())
    """,
    "one-time checks and cache fills": """
        import time
        import torch

        class HeteroLinear(torch.nn.Module):
            def _measure(self, x, key):
                torch.cuda.synchronize()
                t = time.perf_counter()
                torch.cuda.synchronize()
                self._cache[key] = time.perf_counter() - t

            def forward(self, x, labels):
                key = x.size(0)
                if key not in self._cache:
                    self._measure(x, key)
                if not self._checked:
                    self._checked = True
                    if (labels < 0).any().item():
                        raise ValueError("negative labels")
                return x @ x.T
    """,
    "RNN bias flags": """
        import torch

        class MyLSTM(torch.nn.LSTM):
            def forward(self, x):
                b = self.bias_ih_l0 if self.bias else None
                return x, b
    """,
    "a CPU copy of a generated sequence": """
        import torch

        for x in loader:
            ids = model.generate(x)
            ids_cpu = ids.cpu()  # noqa: PFL203
            texts = ids_cpu.tolist()
    """,
    "periodic blocks with a final step, callables named like losses, accumulators": """
        import torch

        def compute(preds, targets):
            device = targets.device
            lcls, lbox = torch.zeros(1, device=device), torch.zeros(1, device=device)
            for p in preds:
                lbox += (p - targets).abs().mean()
                lcls += p.mean()
            return lbox + lcls

        def run(model, dataloader, device, compute_loss=None):
            for img, targets in dataloader:
                out, train_out = model(img.to(device))
                if compute_loss:
                    loss = compute_loss(train_out, targets)

        def train(model, loader, opt, log_every, num_steps, val_every):
            for i, (x, y) in enumerate(loader):
                loss = compute(model(x.cuda()), y.cuda())
                loss.backward()
                opt.step()
                if i % log_every == 0 or i == num_steps - 1:
                    print(loss.item())
                last_step = i == num_steps
                if last_step or (val_every > 0 and i % val_every == 0):
                    torch.cuda.synchronize()
                    print(f"val_loss:{loss:.4f}")
    """,
    "a training routine named like a loss, and loops over models": """
        import torch

        def train_cosine_loss(teacher, student, train_loader, device):
            teacher.to(device)
            student.to(device)
            opt = torch.optim.Adam(student.parameters())
            for inputs, labels in train_loader:
                loss = student(inputs.to(device)).sum()
                loss.backward()
                opt.step()

        def encode_prompt(prompt_ids, tokenizers, text_encoders, device):
            embeds = []
            for tokenizer, text_encoder in zip(tokenizers, text_encoders):
                mask = torch.ones(prompt_ids.shape).to(device)
                embeds.append(text_encoder(prompt_ids, attention_mask=mask))
            return embeds
    """,
    "an epoch loop that validates once per epoch": """
        import torch

        def evaluate(model, x):
            return model(x).mean()

        def main(model, loader, opt, X_val):
            for epoch in range(10):
                for x, y in loader:
                    loss = model(x)
                    loss.backward()
                    opt.step()
                val = evaluate(model, X_val)
                out = model(X_val)
                print(val.item(), out.sum().item())
    """,
    "dict keys are strings": """
        import torch

        class Trainer:
            def concatenated_inputs(self, batch: dict[str, torch.LongTensor]):
                out = {}
                for k in batch:
                    if k.startswith("chosen") and k.endswith("ids"):
                        out[k] = batch[k]
                return out

            def compute_loss(self, model, inputs):
                return model(**self.concatenated_inputs(inputs)).loss
    """,
    "an epoch loop around train() and test() functions": """
        import torch

        def train(model, loader, opt):
            for x, y in loader:
                loss = model(x.cuda()).sum()
                loss.backward()
                opt.step()

        for epoch in range(10):
            train(model, train_loader, optimizer)
            with torch.no_grad():
                sample = torch.randn(64, 20).to(device)
                sample = model.decode(sample).cpu()
                save_image(sample)
    """,
    "a loss that loops over scales is still a loss, one that trains is not": """
        import torch
        import torch.nn as nn

        def compute_loss(preds, targets, criterion):
            total = torch.zeros((), device=targets.device)
            for p in preds:
                total += criterion(p, targets)
            return total

        def train_cosine_loss(teacher, student, train_loader, device):
            teacher.to(device)
            for inputs, labels in train_loader:
                loss = student(inputs.to(device)).sum()
                loss.backward()
    """,
    "a script that never leaves the CPU": """
        import numpy as np
        import torch
        import torch.nn as nn

        class Sequence(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(51, 1)

            def forward(self, input):
                return self.linear(input)

        data = np.load("traindata.npy")
        input = torch.from_numpy(data[3:, :-1])
        target = torch.from_numpy(data[3:, 1:])
        seq = Sequence()
        criterion = nn.MSELoss()
        loader = torch.utils.data.DataLoader(dataset, batch_size=8)
        for i in range(10):
            loss = criterion(seq(input), target)
            loss.backward()
            print("loss:", loss.item())
            for x, y in loader:
                running = criterion(seq(x), y).item()
    """,
    "datasets and data transforms run in the data pipeline": """
        import torch

        class VirtualNode(BaseTransform):
            def forward(self, data):
                t = data.edge_type
                return int(t.max()) if t.numel() > 0 else 0

        class Willow(InMemoryDataset):
            def process(self):
                loader = torch.utils.data.DataLoader(self.raw_images, batch_size=32)
                feats = []
                for batch in loader:
                    out = self.vgg(batch.to("cuda"))
                    feats.append(out.to("cpu"))
                self.save(feats, self.processed_paths[0])
    """,
    "a sweep over written-out configurations": """
        import torch

        def run_and_get_grads(model, x):
            model(x).mean().backward()
            return next(model.parameters()).grad

        def main(model, x):
            for hook, wrapper in [("fp16", None), ("bf16", None), ("power_sgd", "fp16")]:
                model = prepare(model, hook, wrapper)
                grads = run_and_get_grads(model, x)
                print(grads.norm().item())
    """,
    "adapter merges and tokenizer outputs": """
        import torch
        from torch import nn

        class LoraLinear(nn.Module):
            def unmerge(self):
                while self.merged_adapters:
                    name = self.merged_adapters.pop()
                    delta = self.lora_B[name] @ self.lora_A[name]
                    self.weight.data = (self.weight.data - delta).to("cpu").to(self.weight.device)

            def forward(self, x):
                if self.disable_adapters and self.merged:
                    self.unmerge()
                return x @ self.weight

        for prompt in loader:
            ids = tokenizer(prompt, truncation=True, return_tensors="pt").input_ids
            untruncated = tokenizer(prompt, padding="longest", return_tensors="pt").input_ids
            if not torch.equal(ids, untruncated):
                print("truncated")
            model(ids.to("cuda"))
    """,
    "dead code, capped collections and rare final steps": """
        import torch

        class PatchDrop(torch.nn.Module):
            def _drop(self, valid: torch.Tensor) -> list:
                return valid.nonzero().flatten().tolist()

            def forward(self, patches: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
                if self.drop_prob:
                    assert False, "WIP, not completed"
                    self._drop(valid)
                return patches

        device = torch.device("cuda")
        examples = []
        for epoch in range(3):
            for i, (x, y) in enumerate(loader):
                out = model(x.to(device))
                out.sum().backward()
                if i % 500 == 0 or (epoch == 2 and i == 999):
                    snapshot = out.cpu()
                if len(examples) < 5:
                    examples.append(out.cpu())
    """,
    "a device that nothing is moved to": """
        import torch

        device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        net = Net()  # net.to(device) would move it; this tutorial trains on the CPU
        loader = torch.utils.data.DataLoader(trainset, batch_size=4)
        running = 0.0
        for inputs, labels in loader:
            loss = criterion(net(inputs), labels)
            loss.backward()
            running += loss.item()
        print(device)
    """,
    "progress bars of other libraries, list parameters": """
        import torch
        from ultralytics.utils import TQDM

        class Trainer:
            def train(self):
                for epoch in range(self.epochs):
                    pbar = TQDM(enumerate(self.train_loader))
                    for i, batch in pbar:
                        loss = self.model(batch)
                        loss.backward()
                        self.optimizer.step()
                    self.optimizer.zero_grad()
                    self.save_model()

            def save_model(self):
                for k, v in self.state.items():
                    if isinstance(v, torch.Tensor) and not torch.isfinite(v).all():
                        raise ValueError(k)

        class SpanLoss(torch.nn.Module):
            def forward(self, logits, offsets_list):
                offsets = torch.tensor(offsets_list, dtype=torch.long)
                spans = offsets.tolist()
                return logits[:, spans[0]].mean()
    """,
    "a private helper's defaults, a capped collection behind a condition": """
        from typing import Optional
        import torch

        class PatchErase(torch.nn.Module):
            const_value = 0.0

            def _values(self, shape, value: Optional[torch.Tensor] = None) -> torch.Tensor:
                fill = value or self.const_value
                return torch.full(shape, fill)

            def forward(self, patches: torch.Tensor) -> torch.Tensor:
                return patches + self._values(patches.shape)

        adv_examples = []
        for data, target in test_loader:
            data = data.to("cuda")
            output = model(data)
            if epsilon == 0 and len(adv_examples) < 5:
                adv_examples.append(output.squeeze().detach().cpu().numpy())
    """,
    "cached builders, other classes' instances, CPU-only branches": """
        import functools
        import torch
        from tensordict import NonTensorStack

        @functools.lru_cache
        def kernel_for(device):
            return torch.as_tensor([[1, 2], [3, 4]], device=device)

        class M(torch.nn.Module):
            def forward(self, x, text, mask):
                if isinstance(text, NonTensorStack):
                    text = text.tolist()
                keep = mask > 0
                if x.device.type == "cpu":
                    x = x[keep]
                return x * kernel_for(x.device), len(text)
    """,
    "a loader attribute set to None in __init__ and assigned elsewhere": """
        import torch

        class Trainer:
            def __init__(self):
                self.train_loader = None

            def train(self):
                for epoch in range(self.epochs):
                    pbar = enumerate(self.train_loader)
                    for i, batch in pbar:
                        loss = self.model(batch)
                        loss.backward()
                        self.optimizer.step()
                    self.optimizer.zero_grad()
                    self.save_model()

            def save_model(self):
                for k, v in self.ema.state_dict().items():
                    if not torch.isfinite(v).all():
                        raise ValueError(k)
    """,
    # Hooks and callbacks: only their per-iteration methods run every step, and only what
    # those do on every iteration.
    "per-epoch and per-run hook and callback methods": """
        import lightning as L
        import torch
        from detectron2.engine import HookBase
        from mmengine.hooks import Hook
        from transformers import TrainerCallback

        def norm(module):
            return torch.stack([p.norm() for p in module.parameters()]).norm().item()

        class EpochHook(Hook):
            def before_run(self, runner):
                print(norm(runner.model))

            def after_train_epoch(self, runner):
                print(norm(runner.model))

            def after_val_epoch(self, runner, metrics=None):
                print(norm(runner.model))

            def after_run(self, runner):
                print(norm(runner.model))

        class TrainHook(HookBase):
            def before_train(self):
                print(norm(self.trainer.model))

            def after_train(self):
                print(norm(self.trainer.model))

        class EpochCallback(L.Callback):
            def on_train_epoch_end(self, trainer, pl_module):
                print(norm(pl_module))

            def on_validation_epoch_end(self, trainer, pl_module):
                print(norm(pl_module))

            def on_fit_end(self, trainer, pl_module):
                print(norm(pl_module))

        class ReportCallback(TrainerCallback):
            def on_epoch_end(self, args, state, control, model=None, **kwargs):
                print(norm(model))

            def on_log(self, args, state, control, logs=None, model=None, **kwargs):
                logs["norm"] = norm(model)

            def on_evaluate(self, args, state, control, model=None, **kwargs):
                print(norm(model))

            def on_save(self, args, state, control, model=None, **kwargs):
                print(norm(model))
    """,
    "throttled hooks": """
        import torch
        from detectron2.engine import HookBase
        from mmengine.hooks import Hook
        from transformers import TrainerCallback

        class CheckLossHook(Hook):
            def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
                if self.every_n_train_iters(runner, 50):
                    assert torch.isfinite(outputs["loss"])
                if self.is_last_train_iter(runner) or self.end_of_epoch(runner.train_dataloader, batch_idx):
                    print(outputs["loss"].item())

        class PeriodicNorm(HookBase):
            def after_step(self):
                next_iter = self.trainer.iter + 1
                if next_iter % self._period == 0 or next_iter == self.trainer.max_iter:
                    print(torch.stack([p.norm() for p in self.trainer.model.parameters()]).norm().item())

        class LogNorm(TrainerCallback):
            def on_step_end(self, args, state, control, model=None, **kwargs):
                if control.should_log:
                    print(torch.stack([p.norm() for p in model.parameters()]).norm().item())
                if state.global_step % args.logging_steps == 0:
                    print(torch.stack([p.norm() for p in model.parameters()]).norm().item())
    """,
    "hook method names on classes that are not hooks": """
        import torch

        class Stats:
            def after_train_iter(self, values):
                return torch.stack(values).mean().item()

        class Report:
            def on_step_end(self, values):
                return torch.stack(values).mean().item()

            def after_step(self, values):
                return torch.stack(values).mean().item()

        def summarize(loader, hooks, stats):
            for h in hooks:  # not in a step loop: once
                h.after_step([torch.ones(1)])
            return stats.after_train_iter([torch.ones(1)])
    """,
    "ignite handlers of other events": """
        import torch
        from ignite.engine import Events

        def attach(trainer, model):
            def weights(engine):
                print(torch.stack([p.norm() for p in model.parameters()]).norm().item())

            @trainer.on(Events.EPOCH_COMPLETED)
            def per_epoch(engine):
                print(torch.stack([p.norm() for p in model.parameters()]).norm().item())

            @trainer.on(Events.ITERATION_COMPLETED(every=100))
            def every_hundred(engine):
                print(torch.stack([p.norm() for p in model.parameters()]).norm().item())

            trainer.add_event_handler(Events.COMPLETED, weights)
            trainer.add_event_handler(Events.ITERATION_COMPLETED(every=50), weights)
    """,
    "hooks called through a list once, after training": """
        import torch
        from detectron2.engine import HookBase

        class Summary(HookBase):
            def after_train(self):
                print(torch.stack([p.norm() for p in self.trainer.model.parameters()]).norm().item())

        def train(model, loader, optimizer, hooks):
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            for h in hooks:
                h.after_train()
    """,
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_look_alikes_stay_silent(name):
    source = textwrap.dedent(SILENT[name]).lstrip()
    found = check_source(source, "snippet.py", select=["ALL"])
    assert found == [], "\n".join(f"{d.location.row}:{d.location.column} {d.code} {d.message}" for d in found)


def test_isinstance_narrows_what_a_name_holds():
    source = textwrap.dedent("""
        import numpy as np
        import torch

        def to_python(metrics):
            if isinstance(metrics, np.generic):
                return metrics.item()
            if isinstance(metrics, (int, float)):
                return metrics
            return metrics

        for x, y in loader:
            out = model(x)
            value = to_python(out.sum())
    """).lstrip()
    assert check_source(source, "snippet.py", select=["ALL"]) == []


def test_pytest_files_are_not_training_code():
    """In pytest's files `test_*` functions check results; `def test(model, loader)` in a
    training script is its evaluation loop."""
    source = textwrap.dedent("""
        import torch

        def test_gradient_accumulation(model, ddp_model, dataloader):
            for batch in dataloader:
                model(batch).sum().backward()
                for p, q in zip(model.parameters(), ddp_model.parameters()):
                    assert torch.allclose(p.grad, q.grad)

        def test(model, device, test_loader):
            correct = 0
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                correct += model(data).argmax(1).eq(target).sum().item()
            return correct
    """).lstrip()
    assert check_source(source, "tests/test_sync.py", select=["ALL"]) == []
    found = {(d.location.row, d.code) for d in check_source(source, "train.py", select=["ALL"])}
    assert found == {(7, "PFL220"), (13, "PFL201")}


def test_the_same_script_on_a_gpu_is_reported():
    """One `.to(device)` is enough to make the script's model calls possibly on a GPU."""
    source = textwrap.dedent("""
        import torch

        seq = Sequence().to(device)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = criterion(seq(x), y)
            loss.backward()
            print("loss:", loss.item())
    """).lstrip()
    assert [(d.location.row, d.code) for d in check_source(source, "train.py", select=["ALL"])] == [(8, "PFL201")]


def test_transforms_are_data_pipeline_code():
    """Classes under `transforms/` are data augmentation (DataLoader workers, CPU images), even
    when they subclass nn.Module; a model's own `transform.py` runs on its batches."""
    source = textwrap.dedent("""
        import torch

        class Normalize(torch.nn.Module):
            def forward(self, tensor):
                mean = torch.as_tensor([0.485, 0.456, 0.406], dtype=tensor.dtype, device=tensor.device)
                if (mean == 0).any():
                    raise ValueError("mean")
                return tensor - mean
    """).lstrip()
    assert check_source(source, "torchvision/transforms/transforms.py", select=["ALL"]) == []
    found = {d.code for d in check_source(source, "torchvision/models/detection/transform.py", select=["ALL"])}
    assert found == {"PFL106", "PFL206"}


def test_failure_branches_are_not_per_step_code_but_their_guards_are():
    """A branch for broken data (NaN/Inf losses, invalid labels that raise or skip the step)
    is never taken by a healthy run: its body is not reported, the guard's own sync is. A
    branch that filters data (`if not keep.all(): boxes = boxes[keep]`) is the data path."""
    source = textwrap.dedent("""
        import math
        import torch

        def train(model, loader, opt, device):
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                loss = model(x).sum()
                if not math.isfinite(loss.item()):
                    print("bad loss", loss.item(), x.sum().item())
                    torch.save(model.state_dict(), "dump.pt")
                    continue
                if torch.isnan(loss).any() or torch.isinf(loss).any():
                    print(loss.item())
                valid = y >= 0
                if not valid.all():
                    bad = y[~valid].tolist()
                    raise ValueError(f"bad labels {bad}")
                keep = x.sum(1) > 0
                if not keep.all():
                    x = x[keep]
                loss.backward()
                opt.step()
    """).lstrip()
    found = {(d.location.row, d.code) for d in check_source(source, "train.py", select=["ALL"])}
    assert found == {(8, "PFL201"), (12, "PFL206"), (15, "PFL206"), (19, "PFL206"), (20, "PFL214")}


def test_a_cpu_only_training_script_stays_silent_with_a_smoke_test():
    """The negative twin of a device-generic loss with a CPU smoke test: a script whose
    data loop itself feeds CPU tensors (nothing is ever moved to an accelerator) waits for
    no GPU, in its loop or in the helpers the loop calls."""
    source = textwrap.dedent("""
        import torch

        def contrastive_loss(a, b):
            sim = a @ b.T
            return sim[sim > 0].mean()

        def main():
            data = torch.randn(64, 8)
            model = torch.nn.Linear(8, 8)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(100):
                x = model(data[step % 8 : step % 8 + 8])
                loss = contrastive_loss(x, x)
                loss.backward()
                opt.step()
    """).lstrip()
    assert check_source(source, "train_cpu.py", select=["ALL"]) == []

from __future__ import annotations

import ast
import re

from perflint.facts.amp import GRAD_SCALER_CLASSES, is_grad_scaler
from perflint.facts.context import RuleContext
from perflint.facts.summaries import PROJECT_CLASS
from perflint.facts.values import Kind, Value
from perflint.rule import Benchmark, Invalid, Rule, Valid

from ._support import argument, literal

# A receiver whose value the analysis does not know is taken for a gradient scaler when it
# is named like one (`scaler`, `self.scaler`, `self._scaler`, `grad_scaler`, `amp_scaler`).
_SCALER_NAME = re.compile(r"scaler", re.IGNORECASE)
# What `scaler.step(x)` is not given when `scaler` is a GradScaler.
_NOT_OPTIMIZER = frozenset({
    Kind.TENSOR, Kind.BATCH, Kind.LOADER, Kind.MODULE, Kind.SEQ, Kind.NDARRAY, Kind.DEVICE,
    Kind.DTYPE, Kind.NONE, Kind.FUNC, Kind.CLASS,
})
_STEP_MESSAGE = ("`{call}` reads the GradScaler's inf/NaN check to the host and waits for the GPU every step;"
                 " a fused optimizer (`fused=True`) takes the check on the device")
_SCALE_MESSAGE = ("`{call}` reads the loss scale to the host (`.item()`) and waits for the GPU every step;"
                  " read it only when logging")
_STATE_MESSAGE = ("`{call}` reads the loss scale and the growth tracker to the host (two `.item()`) and waits"
                  " for the GPU every step; save it only with a checkpoint")
_READS = {"get_scale": _SCALE_MESSAGE, "state_dict": _STATE_MESSAGE}


class GradScalerStepSync(Rule):
    """## What it does
    Checks for `scaler.step(optimizer)` on a `torch.amp.GradScaler` (also
    `torch.cuda.amp.GradScaler` and FSDP's `ShardedGradScaler`) in code that runs every
    step, when the optimizer is not known to be fused, and for `scaler.get_scale()` and
    `scaler.state_dict()` there.

    ## Why is this bad?
    With fp16 autocast, `scaler.step(optimizer)` skips the step when the scaled gradients
    hold an inf or NaN. For an optimizer that cannot take that decision on the device,
    `GradScaler._maybe_opt_step` decides it on the host:
    `if not sum(v.item() for v in found_inf_per_device.values()): optimizer.step()`. Each
    `.item()` waits for the backward pass and everything queued before it, so the GPU runs
    dry while the CPU prepares the next step, every step. A fused optimizer
    (`torch.optim.Adam/AdamW/SGD/Adagrad(..., fused=True)`) sets
    `_step_supports_amp_scaling`: `GradScaler.step` then hands it `grad_scale` and
    `found_inf` as device tensors and the fused kernel unscales and skips on the device,
    with no host read. `scaler.get_scale()` is `self._scale.item()`: a sync on every call,
    and `scaler.state_dict()` calls it and `_get_growth_tracker()` (another `.item()`).
    `scaler.scale()`, `scaler.unscale_()` and `scaler.update()` do not sync.

    ## Example
    ```python
    import torch

    scaler = torch.amp.GradScaler("cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Use instead
    ```python
    import torch

    scaler = torch.amp.GradScaler("cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```
    With bf16 autocast no scaler is needed at all. For `get_scale()`, call it only in the
    steps that log (`if step % log_every == 0:`), or log `scaler._scale` (a device tensor,
    None before the first `scale()`) through a path that keeps it on the device.

    ## Fix safety
    There is no automatic fix. `fused=True` runs a different kernel, so parameters differ
    in the last bits; it needs floating-point parameters on a device with fused kernels
    (CUDA, and CPU, XPU, MPS, HPU in recent releases), cannot be combined with
    `foreach=True` or `differentiable=True`, and exists for Adam, AdamW, SGD and Adagrad
    only. A skipped step also differs slightly: the fused kernel leaves the parameters and
    moments unchanged but the optimizer step still runs (its state's `step` is incremented
    and decremented on the device), and `scaler.step` no longer returns None for it. An
    optimizer built in another file or by a factory is not known to be fused, so the rule
    reports it: suppress the finding if it is.

    ## Benchmark
    Both forms run one fp16 autocast step with a GradScaler (initial scale 1024, so the step
    is taken): Adam vs Adam with `fused=True`. The results are compared with
    `compare="close"`: the fused kernel rounds differently (about 1e-9 on a CPU).

    ## References
    - `GradScaler._maybe_opt_step` and `GradScaler.step` in torch/amp/grad_scaler.py: the
      `.item()` on `found_inf_per_device`, and the `_step_supports_amp_scaling` branch that
      sets `optimizer.grad_scale` / `optimizer.found_inf` instead.
    - `GradScaler.get_scale` in torch/amp/grad_scaler.py ("incurs a CPU-GPU sync"), and
      `GradScaler.state_dict`, which calls it and `_get_growth_tracker` (`.item()`).
    - `Adam.__init__` (torch/optim/adam.py), `SGD.__init__` (sgd.py), `Adagrad.__init__`
      (adagrad.py): `if fused: self._step_supports_amp_scaling = True`; `_fused_adam` passes
      `grad_scale` and `found_inf` to `torch._fused_adam_`.
    - [Automatic Mixed Precision examples](https://pytorch.org/docs/stable/notes/amp_examples.html)
    """

    code = "PFL230"
    name = "grad-scaler-step-sync"
    message = _STEP_MESSAGE
    # `scaler` too: a file that only calls a wrapper (`loss_scaler(loss, optimizer)`) must be
    # walked for the wrapper in another file to be known to run every step.
    triggers = (b".step(", b"get_scale", b"scaler", b"Scaler")
    invalid = [
        Invalid(
            """
            import torch

            def train(model, loader, criterion, epochs):
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                scaler = torch.amp.GradScaler("cuda")
                for epoch in range(epochs):
                    for x, y in loader:
                        with torch.autocast("cuda", dtype=torch.float16):
                            loss = criterion(model(x), y)
                        optimizer.zero_grad()
                        scaler.scale(loss).backward()
                        scaler.step(optimizer)
                        scaler.update()
            """,
            note="a scaler and a non-fused optimizer made in the same function",
        ),
        Invalid(
            """
            import torch

            class Trainer:
                def __init__(self, args, model):
                    self.model = model
                    self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                    self.scaler = torch.cuda.amp.GradScaler(enabled=args.amp)

                def train_one_iter(self, inps, targets):
                    with torch.cuda.amp.autocast(enabled=self.args.amp):
                        loss = self.model(inps, targets)["total_loss"]
                    self.optimizer.zero_grad()
                    self.scaler.scale(loss).backward()
                    self.scaler.step(self.optimizer)
                    self.scaler.update()

                def train_in_iter(self):
                    for inps, targets in self.train_loader:
                        self.train_one_iter(inps, targets)
            """,
            note="`self.scaler` with `enabled=` a setting (YOLOX's trainer)",
        ),
        Invalid(
            """
            import torch

            def train_one_epoch(model, criterion, data_loader, optimizer, device, scaler, print_freq):
                for i, (image, target) in enumerate(data_loader):
                    image, target = image.to(device), target.to(device)
                    with torch.autocast("cuda", enabled=scaler is not None):
                        loss = criterion(model(image), target)
                    optimizer.zero_grad()
                    if scaler is not None:
                        scaler.scale(loss).backward()
                        scaler.step(optimizer)
                        scaler.update()
                    else:
                        loss.backward()
                        optimizer.step()
                    print(f"lr {optimizer.param_groups[0]['lr']:.4f} scale {scaler.get_scale():.1f}")
                    loss_scale = scaler.state_dict()["scale"]
            """,
            count=3,
            note="a scaler passed as a parameter; `get_scale()` and `state_dict()` in per-step logging",
        ),
        Invalid(
            """
            import torch

            class NativeScaler:
                state_dict_key = "amp_scaler"

                def __init__(self):
                    self._scaler = torch.cuda.amp.GradScaler()

                def __call__(self, loss, optimizer, clip_grad=None, parameters=None):
                    self._scaler.scale(loss).backward()
                    if clip_grad is not None:
                        self._scaler.unscale_(optimizer)
                        torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
                    self._scaler.step(optimizer)
                    self._scaler.update()

            def train_one_epoch(model, loader, optimizer, loss_scaler):
                for x, y in loader:
                    with torch.autocast("cuda"):
                        loss = model(x, y)
                    optimizer.zero_grad()
                    loss_scaler(loss, optimizer, clip_grad=1.0, parameters=model.parameters())

            loss_scaler = NativeScaler()
            train_one_epoch(model, loader, optimizer, loss_scaler)
            """,
            note="a wrapper whose `__call__` steps the scaler (timm's NativeScaler)",
        ),
        Invalid(
            """
            import torch
            from torch.cuda.amp import GradScaler

            gen_opt = torch.optim.Adam(gen.parameters(), lr=2e-4, fused=True)
            disc_opt = torch.optim.Adam(disc.parameters(), lr=2e-4, fused=False)
            gs = GradScaler()
            for real in loader:
                gs.scale(d_loss(real)).backward()
                gs.step(disc_opt)
                gs.scale(g_loss(real)).backward()
                gs.step(gen_opt)
                gs.update()
            """,
            note="two optimizers: only the one that is not fused is reported",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda")
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = criterion(model(x), y)
                optimizer.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                if step % 100 == 0:
                    print(f"scale {scaler.get_scale()}")
            """,
            note="a fused optimizer; `get_scale()` only in the steps that log",
        ),
        Valid(
            """
            import torch

            def warmup(model, batch, optimizer):
                scaler = torch.amp.GradScaler("cuda")
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(batch).mean()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                print(scaler.get_scale())

            warmup(model, next(iter(loader)), optimizer)
            """,
            note="once, outside the training loop",
        ),
        Valid(
            """
            import torch

            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            note="bf16 autocast needs no scaler",
        ),
        Valid(
            """
            import torch
            from mylib import Scaler

            scaler = Scaler()
            for obs in loader:
                action = policy(obs)
                obs, reward = env.step(action)
                scaler.step(optimizer)
                sampler.step(action)
            """,
            note="objects with a `step` method that are not gradient scalers",
        ),
        Valid(
            """
            import torch

            scaler = torch.amp.GradScaler("cuda", enabled=False)
            cpu_scaler = torch.amp.GradScaler("cpu")
            for x, y in loader:
                with torch.autocast("cpu", dtype=torch.float16):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                cpu_scaler.step(optimizer)
                scaler.update()
            """,
            note="a disabled scaler calls `optimizer.step()`; a CPU scaler waits for no GPU",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            model = torch.nn.Sequential(*[torch.nn.Linear(size, size) for _ in range(4)]).to(device)
            x = torch.randn(256, size, device=device)
            scaler = torch.amp.GradScaler(device.type, init_scale=1024.0)
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            fused_optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
        """,
        bad="""
            optimizer.zero_grad()
            with torch.autocast(device.type, dtype=torch.float16):
                loss = model(x).square().mean()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            result = torch.cat([p.detach().flatten() for p in model.parameters()])
        """,
        good="""
            fused_optimizer.zero_grad()
            with torch.autocast(device.type, dtype=torch.float16):
                loss = model(x).square().mean()
            scaler.scale(loss).backward()
            scaler.step(fused_optimizer)
            scaler.update()
            result = torch.cat([p.detach().flatten() for p in model.parameters()])
        """,
        description="`scaler.step(optimizer)` with Adam vs Adam(fused=True)",
        compare="close",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr not in ("step", "get_scale", "state_dict"):
            return
        if not _is_grad_scaler(func.value, ctx.value(func.value), ctx):
            return
        if func.attr != "step":
            if not node.args and not node.keywords:
                ctx.report(node, _READS[func.attr], call=_call_text(node, ctx))
            return
        optimizer = argument(node, 0, "optimizer")
        if optimizer is None or isinstance(optimizer, ast.Starred):
            return
        value = ctx.value(optimizer)
        if value.kind in _NOT_OPTIMIZER or _fused(value):
            return
        ctx.report(node, call=_call_text(node, ctx))


def _is_grad_scaler(receiver: ast.expr, value: Value, ctx: RuleContext) -> bool:
    """A GradScaler that is enabled and scales for an accelerator (as far as the code says)."""
    if is_grad_scaler(value):
        return _syncs(value.origin, ctx)
    if value.kind is Kind.UNKNOWN and value.ref and value.ref.startswith(PROJECT_CLASS):
        return value.ref.endswith("GradScaler")  # an imported class: fairscale's ShardedGradScaler
    if value.kind is Kind.OBJECT and value.ref:
        return False  # an instance of a class of this file
    if value.kind not in (Kind.UNKNOWN, Kind.OBJECT):
        return False
    name = receiver.attr if isinstance(receiver, ast.Attribute) else receiver.id if isinstance(receiver, ast.Name) else ""
    return bool(_SCALER_NAME.search(name))


def _syncs(origin: object, ctx: RuleContext) -> bool:
    """False for `GradScaler(enabled=False)` and `GradScaler("cpu")` (no accelerator to wait for)."""
    if not isinstance(origin, ast.Call):
        return True
    qualname = ctx.qualname(origin.func) or ""
    if qualname.startswith("torch.cpu."):
        return False
    position = GRAD_SCALER_CLASSES.get(qualname)
    if position is None:  # made in a scope whose names this one does not see: read no argument
        return True
    if literal(argument(origin, position, "enabled")) is False:
        return False
    return not (qualname.startswith("torch.amp.") and literal(argument(origin, 0, "device")) == "cpu")


def _fused(value: Value) -> bool:
    """An optimizer built here with a literal `fused=True`."""
    origin = value.origin
    if value.kind is not Kind.OPTIMIZER or not isinstance(origin, ast.Call):
        return False
    return any(kw.arg == "fused" and literal(kw.value) is True for kw in origin.keywords)


def _call_text(node: ast.Call, ctx: RuleContext) -> str:
    text = ctx.text(node)
    if "\n" in text or len(text) > 60:
        return f"{ctx.text(node.func)}(...)"
    return text

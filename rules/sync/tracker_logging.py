from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.hotness import receiver_name
from perflint.rule import Benchmark, Invalid, Rule, Valid

# SummaryWriter methods (TensorBoard, tensorboardX, and the visualizers that forward to
# them) -> (position, keyword) of the argument they convert with `make_np` (`.cpu().numpy()`).
_WRITER_METHODS = {
    "add_scalar": (1, "scalar_value"),
    "add_scalars": (1, "tag_scalar_dict"),
    "add_histogram": (1, "values"),
    "add_image": (1, "img_tensor"),
    "add_images": (1, "img_tensor"),
}
# Weights & Biases: every value of the logged dict goes through `json_friendly`
# (`.item()` for a 0-dim tensor, else `.cpu().detach().numpy()`).
_WANDB_LOG = frozenset({"wandb.log", "wandb.run.log"})
# Lightning Fabric: `log_dict(metrics)` (and `log(name, value)`, which calls it) runs
# `convert_tensors_to_scalars` (`.item()`) before looking for a logger, with none attached too.
_FABRIC_METHODS = {"log_dict": (0, "metrics"), "log": (1, "value")}


class TensorLoggedToTracker(Rule):
    """## What it does
    Checks for a device tensor handed to an experiment tracker in code that runs every
    step: TensorBoard's `writer.add_scalar(tag, t, step)`, `add_scalars(tag, {"a": t})`,
    `add_histogram`, `add_image(s)` (on `torch.utils.tensorboard.SummaryWriter`,
    tensorboardX, and visualizers with the same methods), `wandb.log({"loss": t})`, and
    Lightning Fabric's `fabric.log_dict({"loss": t})` and `fabric.log("loss", t)`.

    Not reported: Python numbers (`loss.item()` is `tensor-item`'s finding), logging every
    N steps (`if step % 100 == 0:`) or once after training, and trackers that refuse tensors
    (MLflow's `log_metric` raises on one).

    ## Why is this bad?
    The tracker needs the numbers on the host. TensorBoard's `add_scalar` converts its value
    with `make_np`, which calls `.cpu().numpy()`; W&B's `json_friendly` calls `.item()` (or
    `.cpu().numpy()`); Fabric's `log_dict` calls `.item()` on every tensor before it looks
    for a logger, so it syncs even with none attached. Each is a blocking device-to-host
    copy that waits until the GPU has finished every kernel queued before it, so logging the
    loss every step stalls every step,
    exactly as `loss.item()` would, with nothing in the code that says so.

    ## Example
    ```python
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        writer.add_scalar("train/loss", loss, step)
    ```

    ## Use instead
    Accumulate on the device and hand the tracker the aggregate every N steps:
    ```python
    running = torch.zeros((), device="cuda")
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        running += loss.detach()
        if step % 100 == 99:
            writer.add_scalar("train/loss", running / 100, step)
            running.zero_()
    ```

    ## Fix safety
    There is no automatic fix: how often to log, and whether to log an average or the last
    value, is the user's choice, and either changes what the dashboard shows.

    ## References
    - `make_np` in torch/utils/tensorboard/_convert_np.py: `x.detach().cpu().numpy()` for a tensor.
    - `json_friendly` in wandb/util.py: `obj.item()` for a 0-dim tensor, else `obj.cpu().detach().numpy()`.
    - `Fabric.log_dict` in lightning/fabric/fabric.py: `convert_tensors_to_scalars(metrics)` first.
    - [Performance tuning guide: avoid unnecessary CPU-GPU synchronization](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization)
    """

    code = "PFL231"
    name = "tensor-logged-to-tracker"
    message = "logging a tensor with {how} copies it to the host and waits for the GPU every step"
    triggers = (b"add_scalar", b"add_histogram", b"add_image", b"wandb", b"fabric")
    invalid = [
        Invalid(
            """
            import torch
            from torch.utils.tensorboard import SummaryWriter

            writer = SummaryWriter("runs/exp")
            for step, (x, y) in enumerate(loader):
                x, y = x.cuda(), y.cuda()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                writer.add_scalar("train/loss", loss, step)
                acc = (model(x).argmax(1) == y).float().mean()
                writer.add_scalars("metrics", {"acc": acc, "lr": 0.1}, step)
            """,
            count=2,
        ),
        Invalid(
            """
            import torch
            import wandb

            def train(model, loader, optimizer, device):
                for batch in loader:
                    images, labels = batch[0].to(device), batch[1].to(device)
                    logits = model(images)
                    loss = torch.nn.functional.cross_entropy(logits, labels)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    wandb.log({"train/loss": loss, "lr": optimizer.param_groups[0]["lr"]})
            """,
            note="wandb.log with a tensor value",
        ),
        Invalid(
            """
            import torch

            class Trainer:
                def __init__(self, model, writer):
                    self.model, self.writer = model, writer

                def train_step(self, step, x, y):
                    loss = self.model(x.cuda()).sub(y.cuda()).pow(2).mean()
                    loss.backward()
                    self.writer.add_scalar(tag="loss", scalar_value=loss, global_step=step)

                def fit(self, loader):
                    for step, (x, y) in enumerate(loader):
                        self.train_step(step, x, y)
            """,
            note="a writer kept on self, keyword arguments, in a step method",
        ),
        Invalid(
            """
            import torch

            def train(fabric, model, optimizer, loader):
                for step, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    fabric.backward(loss)
                    optimizer.step()
                    fabric.log_dict({"step": step, "train_loss": loss})
                    fabric.log("lr", torch.tensor(0.1))
            """,
            count=1,
            note="Lightning Fabric converts every tensor with `.item()`; a CPU tensor costs no wait",
        ),
    ]
    valid = [
        Valid(
            """
            import torch
            import wandb
            from torch.utils.tensorboard import SummaryWriter

            writer = SummaryWriter()
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x.cuda()), y.cuda())
                writer.add_scalar("lr", optimizer.param_groups[0]["lr"], step)
                if step % 100 == 0:
                    writer.add_scalar("train/loss", loss, step)
                    wandb.log({"loss": loss})
            writer.add_scalar("final/loss", loss, step)
            """,
            note="Python numbers, every N steps, once after the loop",
        ),
        Valid(
            """
            import torch

            running_loss = 0.0
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x.cuda()), y.cuda())
                running_loss += float(loss)
                visualizer.add_scalars({"loss": running_loss, "step": step}, step)
                meter.add_scalar("loss", running_loss / 10, step)
            """,
            note="a visualizer that takes the dict first, values that are not tensors",
        ),
        Valid(
            """
            import torch

            writer = torch.utils.tensorboard.SummaryWriter()
            for step, (x, y) in enumerate(loader):
                out = model(x)
                writer.add_histogram("weights", model.weight.detach().cpu(), step)
                writer.add_image("input", x[0], step)
            """,
            note="tensors on the CPU: the batch never moved, a copy made (PFL203 reports the `.cpu()`)",
        ),
        Valid(
            """
            import logging
            import torch

            def train(model, optimizer, loader, logger):
                for step, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
                    logger.log(logging.INFO, loss)
                    logger.log_dict({"loss": loss})
            """,
            note="`.log` and `.log_dict` of something not named as Fabric",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            import tempfile
            from torch.utils.tensorboard import SummaryWriter

            x = torch.randn(size, size, device=device)
            writer = SummaryWriter(tempfile.mkdtemp())
            running = torch.zeros((), device=device)
        """,
        bad="""
            y = torch.tanh(x)
            loss = y.mean()
            writer.add_scalar("train/loss", loss, 0)
            result = loss
        """,
        good="""
            y = torch.tanh(x)
            loss = y.mean()
            running.add_(loss.detach())
            result = loss
        """,
        teardown="""
            writer.close()
        """,
        description="`writer.add_scalar(tag, loss)` every step vs a device-side running sum logged every N steps",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name in _WANDB_LOG:
            data = node.args[0] if node.args else _keyword(node, "data")
            if data is not None and any(ctx.is_tensor(v) for v in _dict_values(data)):
                ctx.report(node, how=f"`{name}()`")
            return
        call = ctx.method_call(node, *_FABRIC_METHODS)
        if call is not None and _names_fabric(call[0]):
            position, keyword = _FABRIC_METHODS[call[1]]
            value = node.args[position] if len(node.args) > position else _keyword(node, keyword)
            values = [] if value is None else _dict_values(value) if call[1] == "log_dict" else [value]
            if any(ctx.is_tensor(v) for v in values):
                ctx.report(node, how=f"Fabric's `.{call[1]}()`")
            return
        call = ctx.method_call(node, *_WRITER_METHODS)
        if call is None:
            return
        _receiver, method = call
        position, keyword = _WRITER_METHODS[method]
        value = node.args[position] if len(node.args) > position else _keyword(node, keyword)
        if value is None:
            return
        values = _dict_values(value) if method == "add_scalars" else [value]
        if any(ctx.is_tensor(v) for v in values):
            ctx.report(node, how=f"`.{method}()`")


def _names_fabric(receiver: ast.expr) -> bool:
    """`fabric`, `self.fabric`, `train_fabric`: the receiver is named as Lightning's Fabric."""
    return receiver_name(receiver).lower().endswith("fabric")


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def _dict_values(node: ast.expr) -> list[ast.expr]:
    """The values of a dict display (`{"loss": t}`) or a `dict(loss=t)` call."""
    if isinstance(node, ast.Dict):
        return [v for v in node.values if v is not None]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return [kw.value for kw in node.keywords if kw.arg is not None]
    return []

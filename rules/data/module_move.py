from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.values import Kind
from perflint.rule import Benchmark, Invalid, Rule, Valid

from ._moves import device_target, is_dtype, keyword


def _moves_device(call: ast.Call, method: str, ctx: RuleContext) -> bool:
    if method == "cuda":
        return True
    device = keyword(call, "device")
    if device is not None:
        return True
    return bool(call.args) and device_target(call.args[0], ctx) is not None


class ModuleMoveInLoop(Rule):
    """## What it does
    Checks for `model.to(device)` and `model.cuda()` on an `nn.Module` in code that runs every
    step: inside the training loop, `forward()`, or a function the loop calls.

    ## Why is this bad?
    `Module.to()` walks every parameter and buffer of the module on every call. When they
    are already on the device nothing is copied, but the walk still costs Python time per
    tensor, every step; when something does move (a buffer re-created on the CPU, say), the
    copy is a blocking host-to-device transfer. Moving the module once, before the loop, is
    enough: it stays there.

    A module *built* and moved every step (`nn.BCEWithLogitsLoss(pos_weight=w).to(device)`
    in a loss function) is worse: its parameters and buffers are created on the CPU and
    copied to the device every time. Build it once (in `__init__`, or before the loop).

    ## Example
    ```python
    for x, y in loader:
        model.to(device)
        loss = criterion(model(x.to(device)), y.to(device))
    ```

    ## Use instead
    ```python
    model.to(device)
    for x, y in loader:
        loss = criterion(model(x.to(device)), y.to(device))
    ```

    Not reported: a module the same function also moves somewhere else (`vae.to(device)`,
    then `vae.to(org_vae_device)` or `model.cpu()`): offloading it between uses saves device
    memory on purpose; and stateless modules (`nn.Upsample(size=(w, h))`, a loss without
    `weight=`), whose move copies nothing.

    ## Fix safety
    There is no automatic fix: the move has to happen once, before the loop, and where that
    is depends on the code around it.

    ## References
    - [`Module.to`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.to)
    """

    code = "PFL107"
    name = "module-move-in-loop"
    message = "`{call}` moves the whole module every step; move it once, before the loop"
    built_message = ("`{call}` builds a module on the CPU and copies its parameters and buffers to "
                     "the device every step; build it once, before the loop")
    family = "data"
    triggers = (b".to(", b".cuda(")
    invalid = [
        Invalid(
            """
            import torch

            for epoch in range(10):
                for x, y in loader:
                    model = model.to(device)
                    criterion.cuda()
                    loss = criterion(model(x), y)
            """,
            count=2,
        ),
        Invalid(
            """
            import torch

            class Wrapper(torch.nn.Module):
                def forward(self, x):
                    self.backbone.to(x.device)
                    return self.backbone(x)
            """,
        ),
        Invalid(
            """
            import torch
            import torch.nn as nn

            def compute_loss(p, targets, pos_weight):
                bce = nn.BCEWithLogitsLoss(pos_weight=torch.Tensor([pos_weight])).to(targets.device)
                return bce(p, targets)

            for x, y in loader:
                loss = compute_loss(model(x), y.to(device), 2.0)
            """,
            note="a module built every step: its CPU buffers are copied every step",
        ),
        Invalid(
            """
            import torch

            def decode(vae, latents, device, weight_dtype):
                vae.to(device)
                image = vae.decode(latents.to(device))
                vae.to(weight_dtype)
                return image

            for latents in loader:
                images = decode(vae, model(latents.cuda()), "cuda", torch.float16)
            """,
            note="moved to the device every step; the later `.to(dtype)` is a cast, not an offload",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            model.to(device)
            for x, y in loader:
                x = x.to(device)
                loss = criterion(model(x), y)
            """,
            note="moved once; moving tensors is fine",
        ),
        Valid(
            """
            import torch

            for step, (x, y) in enumerate(loader):
                if step == 0:
                    model.to(device)
                model.to(torch.float16)
                loss = criterion(model(x), y)
            """,
            note="a one-time move guarded by the first step; a dtype-only conversion",
        ),
        Valid(
            """
            import torch.nn as nn

            class ContrastiveLoss(nn.Module):
                def __init__(self, reduction="mean"):
                    super().__init__()
                    self.reduction = reduction

                def forward(self, inputs, targets):
                    return nn.CrossEntropyLoss(reduction=self.reduction).cuda()(inputs, targets)

            for x, y in loader:
                loss = ContrastiveLoss()(model(x.cuda()), y.cuda())
            """,
            note="a loss without `weight=` has no parameters or buffers: the move copies nothing (SlowFast)",
        ),
        Valid(
            """
            import torch

            def decode(vae, latents, device):
                org_vae_device = vae.device
                vae.to(device)
                image = vae.decode(latents.to(device))
                vae.to(org_vae_device)
                return image

            def upsample_noise(noise, device):
                b, c, w, h = noise.shape
                return torch.nn.Upsample(size=(w, h), mode="bilinear").to(device)(noise)

            for latents in loader:
                images = decode(vae, model(latents.cuda()), "cuda")
                noise = upsample_noise(images, "cuda")
            """,
            note="a module offloaded on purpose (moved in, used, moved back); a stateless module given sizes",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(32)]).to(device)
            x = torch.randn(64, 256, device=device)
        """,
        bad="""
            model.to(device)
            result = model(x)
        """,
        good="""
            result = model(x)
        """,
        description="`model.to(device)` every step on a 64-parameter module already on the device",
        compare="close",
        claim="time",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        method = ctx.method_call(node, "to", "cuda")
        if method is None:
            return
        receiver, name = method
        if ctx.value(receiver).kind is not Kind.MODULE:
            return
        # `isinstance(receiver, ast.Call)`: a fresh module, `nn.BCEWithLogitsLoss(pos_weight=w).to(device)`
        if isinstance(receiver, ast.Call) and _stateless(receiver, ctx):
            return  # `nn.CrossEntropyLoss(reduction=r).cuda()`: nothing to copy
        if _moves_device(node, name, ctx):
            if isinstance(receiver, ast.Call):
                ctx.report(node, self.built_message, call=f"{ctx.text(receiver.func)}(...).{name}()")
            elif not _swapped(node, receiver, ctx):
                ctx.report(node, call=f"{ctx.text(receiver)}.{name}()")


def _swapped(node: ast.Call, receiver: ast.expr, ctx: RuleContext) -> bool:
    """The same function also moves this module somewhere else (`vae.to(accelerator.device)`
    ... `vae.to(org_vae_device)`, `model.cuda()` ... `model.cpu()`): offloading on purpose, to
    save device memory, which "move it once" would undo."""
    function = ctx.function_node
    if function is None:
        return False
    name, where = ctx.text(receiver), _destination(node, ctx)
    moved_by = node.func.attr if isinstance(node.func, ast.Attribute) else ""
    for other in ast.walk(function):
        if other is node or not isinstance(other, ast.Call) or not isinstance(other.func, ast.Attribute) \
                or other.func.attr not in ("to", "cuda", "cpu") or ctx.text(other.func.value) != name:
            continue
        if other.func.attr == "to" and keyword(other, "device") is None \
                and (not other.args or is_dtype(other.args[0], ctx)):
            continue  # `vae.to(weight_dtype)`: a cast, not a move
        if other.func.attr == "cpu" or (other.func.attr == "cuda") != (moved_by == "cuda") \
                or _destination(other, ctx) != where:
            return True
    return False


def _destination(call: ast.Call, ctx: RuleContext) -> str:
    """The source text of a move's device (`""` for `.cuda()` without one)."""
    device = keyword(call, "device")
    if device is not None:
        return ctx.text(device.value)
    return ctx.text(call.args[0]) if call.args else ""


# torch.nn modules without parameters or buffers unless given a tensor (a loss's `weight=`):
# moving one copies nothing.
_STATELESS = frozenset(f"torch.nn.{name}" for name in """
    CrossEntropyLoss NLLLoss BCELoss BCEWithLogitsLoss MSELoss L1Loss SmoothL1Loss HuberLoss KLDivLoss
    CTCLoss CosineEmbeddingLoss MarginRankingLoss TripletMarginLoss SoftMarginLoss MultiLabelSoftMarginLoss
    MultiMarginLoss PoissonNLLLoss GaussianNLLLoss HingeEmbeddingLoss MultiLabelMarginLoss CosineSimilarity
    PairwiseDistance ReLU ReLU6 LeakyReLU GELU SiLU Sigmoid Tanh Softmax LogSoftmax ELU Mish Hardswish
    Hardtanh Softplus Identity Dropout Dropout1d Dropout2d Dropout3d Flatten Unflatten MaxPool1d MaxPool2d
    MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d
    AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d Upsample PixelShuffle PixelUnshuffle""".split())


def _stateless(call: ast.Call, ctx: RuleContext) -> bool:
    """A torch.nn module with nothing to move: a stateless class given no tensor argument."""
    if ctx.call_name(call) not in _STATELESS:
        return False
    arguments = [*call.args, *(k.value for k in call.keywords)]
    return not any(isinstance(a, ast.Starred) for a in call.args) and all(k.arg is not None for k in call.keywords) \
        and all(_python_argument(a, ctx) for a in arguments)


def _python_argument(node: ast.expr, ctx: RuleContext) -> bool:
    """A constant, a Python value, or a tuple of them (`size=(w, h)`)."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_python_argument(e, ctx) for e in node.elts)
    return isinstance(node, ast.Constant) or ctx.value(node).kind is Kind.PYTHON

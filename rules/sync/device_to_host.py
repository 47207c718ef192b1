from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.torch_api import is_non_blocking, keyword, move_destination
from perflint.rule import Benchmark, Invalid, Rule, Valid

from ._host_library import feeds_host_library


class DeviceToHostCopy(Rule):
    """## What it does
    Checks for blocking copies of a tensor to host memory in code that runs every step:
    `t.cpu()`, `t.to("cpu")`, `t.to(torch.device("cpu"))`, `t.to(device="cpu")`,
    `t.to(cpu_tensor)` and `t.numpy(force=True)`. `t.cpu().numpy()` and
    `t.detach().cpu()` are one copy and reported once, at the copy. Also a device tensor
    written into a tensor known to be in host memory (`loc_t[idx] = loc` after `loc_t =
    torch.Tensor(n, p, 4)`, as in SSD-style matchers): `copy_` from the device, the same wait.

    Not reported: `t.to("cpu", non_blocking=True)` (no sync; see below), tensors already
    known to be on the CPU, and `model.cpu()` on modules (also a `.to("cpu")` whose result
    is not used, `models["flux"].to("cpu")`: only a module moves in place). Copies made for a host-only library
    (`linear_sum_assignment(cost.cpu())`, OpenCV, PIL, pycocotools, NumPy: the copy is the
    point there), and in an evaluation loop NumPy arrays handed to the project's own
    functions in the same iteration (`get_metrics(mix_np, est_np)`), are left to the opt-in
    code `host-library-copy` (PFL229), off by default.

    ## Why is this bad?
    A device-to-host copy with `non_blocking=False` (the default) is a `cudaMemcpyAsync`
    followed by a stream synchronize: the CPU waits until every kernel queued before the
    copy has finished, and the GPU then idles while the CPU prepares the next step.

    ## Example
    ```python
    for x, y in loader:
        logits = model(x)
        probs = logits.softmax(-1).detach().cpu().numpy()
        all_probs.append(probs)
    ```

    ## Use instead
    Keep per-step results on the device and copy them once, in one batch, after the loop
    (or every N steps):
    ```python
    for x, y in loader:
        logits = model(x)
        all_probs.append(logits.softmax(-1).detach())
    probs = torch.cat(all_probs).cpu().numpy()
    ```
    `t.to("cpu", non_blocking=True)` does not wait, but the host data is only valid after a
    synchronization (for example `torch.cuda.Event.synchronize()`); reading it earlier gives
    garbage.

    ## References
    - [Performance tuning guide: avoid unnecessary CPU-GPU synchronization](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization)
    - [A guide on good usage of `non_blocking` and `pin_memory()`](https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html)
    """

    code = "PFL203"
    name = "device-to-host-copy"
    message = "`{call}` copies a tensor to the host and waits for the GPU every step"
    # (writes into host tensors: left to the base triggers, `torch` and `tensor`; a trigger as
    # wide as `]` would have the analysis walk nearly every file)
    triggers = (b"cpu", b"force")
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                a = out.cpu()
                b = out.to("cpu")
                c = out.to(torch.device("cpu"))
                d = out.to(device="cpu")
                e = out.numpy(force=True)
                f = out.detach().cpu().numpy()
            """,
            count=6,
        ),
        Invalid(
            """
            import torch as T

            class Head(T.nn.Module):
                def forward(self, x):
                    host = T.Tensor.cpu(x)
                    moved = T.Tensor.to(x, "cpu")
                    ref = T.zeros(3)
                    like = x.to(ref)
                    return host, moved, like
            """,
            count=3,
            note="unbound method forms, and `.to(tensor)` with a CPU tensor",
        ),
        Invalid(
            """
            import torch

            cpu = torch.device("cpu")

            def evaluate_batch(model, batch):
                out = model(batch)
                return out.to(cpu, torch.float32)

            for batch in loader:
                results.append(evaluate_batch(model, batch))
            """,
            note="a device held in a variable, with a dtype",
        ),
        Invalid(
            """
            import torch
            from scipy.optimize import linear_sum_assignment

            for images, targets in loader:
                outputs = model(images.to(device))
                cost = torch.cdist(outputs, targets.to(device)).cpu()
                print(f"mean cost {cost.mean():.3f}")
                rows, cols = linear_sum_assignment(cost)
            """,
            note="the copy also read by the step's host code: not only for the library",
        ),
        Invalid(
            """
            import torch

            def train_one_epoch(model, criterion, data_loader, optimizer, device):
                for images, targets in data_loader:
                    images = images.to(device)
                    targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
                    outputs = model(images)
                    labels = targets[0]["labels"].cpu()
                    loss = criterion(outputs, labels.to(device))
                    loss.backward()
                    optimizer.step()
            """,
            note="targets moved to the device, then copied back",
        ),
        Invalid(
            """
            import torch

            def match(truths, labels, conf_t, idx):
                best = (truths @ truths.t()).argmax(0)
                conf_t[idx] = labels[best] + 1

            class MultiBoxLoss(torch.nn.Module):
                def forward(self, conf_data, targets):
                    conf_t = torch.LongTensor(conf_data.size(0), conf_data.size(1))
                    for idx in range(conf_data.size(0)):
                        match(targets[idx][:, :-1], targets[idx][:, -1], conf_t, idx)
                    return torch.nn.functional.cross_entropy(conf_data, conf_t.cuda())

            for images, targets in loader:
                loss = MultiBoxLoss()(model(images.cuda()), [t.cuda() for t in targets])
                loss.backward()
            """,
            note="a device tensor written into a host tensor (ssd.pytorch's matcher): a copy to the host",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                staged = out.to("cpu", non_blocking=True)
                staged2 = out.to(device="cpu", non_blocking=True)
            """,
            note="non_blocking copies do not wait (and are a correctness hazard instead)",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                model.cpu()
                idx = torch.arange(10).cpu()
                table = torch.zeros(3).to("cpu")
                arr = torch.ones(3).numpy()
                g = out.to("cuda")
            """,
            note="modules, tensors already on the CPU, host-to-device moves",
        ),
        Valid(
            """
            import numpy as np
            import pandas as pd

            for x, y in loader:
                a = np.zeros(3)
                b = a.copy()
                frame = pd.DataFrame(a)
                c = frame.to_numpy()
            """,
            note="numpy and pandas",
        ),
        Valid(
            """
            import torch

            outs = []
            for x, y in loader:
                outs.append(model(x).detach())
            all_out = torch.cat(outs).cpu().numpy()
            """,
            note="once after the loop",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self, table):
                    super().__init__()
                    self.table = table.cpu()

                def forward(self, x):
                    return x.float()
            """,
            note="__init__ runs once",
        ),
        Valid(
            """
            import cv2
            import torch
            from scipy.optimize import linear_sum_assignment

            class HungarianMatcher(torch.nn.Module):
                @torch.no_grad()
                def forward(self, outputs, targets):
                    bs, num_queries = outputs["pred_logits"].shape[:2]
                    C = torch.cdist(outputs["pred_boxes"].flatten(0, 1), torch.cat([v["boxes"] for v in targets]))
                    C = C.view(bs, num_queries, -1).cpu()
                    sizes = [len(v["boxes"]) for v in targets]
                    return [linear_sum_assignment(c[i]) for i, c in enumerate(C.split(sizes, -1))]

            for step, (images, masks) in enumerate(loader):
                logits = model(images.to(device))
                cv2.imwrite(f"pred_{step}.png", logits.argmax(1)[0].byte().cpu().numpy())
            """,
            note="copies for host-only libraries (DETR's matcher, OpenCV): opt-in PFL229",
        ),
        Valid(
            """
            import torch

            def train_one_epoch(model, criterion, data_loader, optimizer, device):
                for images, targets in data_loader:
                    images = images.to(device)
                    outputs = model(images)
                    labels = targets[0]["labels"].cpu()
                    loss = criterion(outputs, labels.to(device))
                    loss.backward()
                    optimizer.step()
            """,
            note="targets the loop never moved are in host memory: `.cpu()` copies nothing",
        ),
        Valid(
            """
            import numpy as np
            import torch
            from scipy.optimize import linear_sum_assignment

            class PermutationInvariantTraining(torch.nn.Module):
                def forward(self, metric_mtx):
                    mmtx = metric_mtx.detach().cpu()
                    best_perm = torch.tensor(np.array([linear_sum_assignment(pwm)[1] for pwm in mmtx]))
                    return best_perm.to(metric_mtx.device)
            """,
            note="a copy made for SciPy is PFL229's (opt-in)",
        ),
        Valid(
            """
            import torch

            class MultiBoxLoss(torch.nn.Module):
                def forward(self, conf_data, targets):
                    conf_t = torch.zeros(conf_data.shape[:2], dtype=torch.long, device=conf_data.device)
                    host_counts = torch.zeros(conf_data.size(0))
                    for idx in range(conf_data.size(0)):
                        conf_t[idx] = targets[idx][:, -1].long().max() + 1
                        host_counts[idx] = len(targets[idx])
                    return torch.nn.functional.cross_entropy(conf_data, conf_t), host_counts

            for images, targets in loader:
                loss, counts = MultiBoxLoss()(model(images.cuda()), [t.cuda() for t in targets])
                loss.backward()
            """,
            note="device values written on the device, host values into a host tensor",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            result = y.mean(0).cpu()
        """,
        good="""
            y = torch.tanh(x)
            result = y.mean(0)
        """,
        description="copy a per-step statistic with `.cpu()` vs keep it on the device",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        label = host_copy(node, ctx)
        if label is not None and not feeds_host_library(node, ctx):
            ctx.report(node, call=label)

    def visit_Assign(self, node: ast.Assign, ctx: RuleContext) -> None:
        """`loc_t[idx] = loc` with `loc_t = torch.Tensor(n, p, 4)` on the host and `loc` on
        the device: `copy_` from the device, a blocking copy like `.cpu()`."""
        value = ctx.value(node.value)
        if not (value.is_tensor and value.on_accel):
            return
        for target in node.targets:
            if isinstance(target, ast.Subscript) and ctx.value(target.value).is_tensor \
                    and ctx.value(target.value).on_cpu:
                ctx.report(target, self.write_message, target=ctx.text(target.value))

    write_message = ("writing a device tensor into `{target}`, a host tensor, copies it to the host and waits "
                     "for the GPU every step; create `{target}` on the device")


def host_copy(node: ast.Call, ctx: RuleContext) -> str | None:
    """How a blocking copy of a tensor to host memory is named (`.cpu()`, `.to(cpu)`,
    `.numpy(force=True)`), or None when `node` is not one."""
    call = ctx.method_call(node, "cpu", "to", "numpy")
    if call is None:
        return None
    if isinstance(ctx.parent(node), ast.Expr):
        return None  # `models["flux"].to("cpu")` as a statement moves a module in place (a tensor's copy would be lost)
    receiver, name = call
    if not ctx.maybe_tensor(receiver):
        return None
    unbound = receiver is not getattr(node.func, "value", None)
    # Look at the arguments after the tensor in `torch.Tensor.to(t, ...)`.
    own = ast.Call(func=node.func, args=node.args[1:], keywords=node.keywords) if unbound else node
    if name == "numpy":
        force = keyword(own, "force")
        if isinstance(force, ast.Constant) and force.value is True:
            return ".numpy(force=True)"
        return None
    if name == "cpu":
        return ".cpu()"
    if move_destination("to", own, ctx.qualname, ctx.value) != "cpu":
        return None
    if is_non_blocking(own) is not False:
        return None  # non_blocking=True does not wait; an expression may be True
    return ".to(cpu)"

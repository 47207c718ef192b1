from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid

from ._host_library import feeds_host_library
from .device_to_host import host_copy


class HostLibraryCopy(Rule):
    """## What it does
    Checks for blocking copies to host memory (`t.cpu()`, `t.to("cpu")`,
    `t.numpy(force=True)`) in code that runs every step, whose result goes to a library that
    only reads host memory: SciPy (`linear_sum_assignment(cost.cpu())`), pycocotools, PIL,
    OpenCV, NumPy, scikit-learn and the like, or a worker process
    (`pool.submit(evaluate, y_pred.cpu(), y)`), directly or through a name the function only
    hands to such calls (`C = C.view(bs, n, -1).cpu()` then
    `[linear_sum_assignment(c[i]) for i, c in enumerate(C.split(sizes, -1))]`). In an
    evaluation or inference loop (one that runs the model and never the backward pass or an
    optimizer step), a NumPy array made from the copy and only handed to functions or
    iterated in that iteration counts too (`est_np = est.cpu().numpy()` then
    `get_metrics(mix_np, est_np)` and `sf.write(path, est_np[0])`): the host needs it there.

    **Off by default** (opt in with `--select PFL229` or `extend-select`): the copy is the
    point there. The library cannot read device memory, so the sync is the price of using
    it, not a mistake. `device-to-host-copy` (PFL203) leaves these copies to this code, so
    that its default findings are the copies that can go away.

    ## Why is this bad?
    It is still a blocking device-to-host copy: the host waits for every kernel queued
    before it, every step. Where the step time matters, the ways out are a device
    implementation of the host algorithm (a GPU assignment solver, `torchvision.ops` box
    ops instead of NumPy ones, `torchmetrics`' COCO mAP on tensors), or moving the host work
    off the step (collect on the device, copy once per N steps or at the end of an
    evaluation).

    ## Example
    ```python
    from scipy.optimize import linear_sum_assignment

    for images, targets in loader:
        outputs = model(images.to(device))
        cost = torch.cdist(outputs["boxes"], targets["boxes"].to(device))
        rows, cols = linear_sum_assignment(cost.cpu())
    ```

    ## Use instead
    Keep the host algorithm out of the step where you can (a device solver, or match
    every N steps); where you cannot, the copy stays and this code is best left off.
    ```python
    for images, targets in loader:
        outputs = model(images.to(device))
        cost = torch.cdist(outputs["boxes"], targets["boxes"].to(device))
        rows, cols = greedy_match_on_device(cost)
    ```

    ## Fix safety
    There is no automatic fix: the replacement is another algorithm.

    ## Benchmark
    The pair stands in a greedy per-row assignment (`np.argmin` of a host copy of the
    cost matrix) for the host algorithm, against the same computation on the device.

    ## References
    - [`scipy.optimize.linear_sum_assignment`](https://docs.scipy.org/doc/scipy/reference/generated/scipy.optimize.linear_sum_assignment.html) (host arrays only)
    - [Performance tuning guide: avoid unnecessary CPU-GPU synchronization](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization)
    """

    code = "PFL229"
    name = "host-library-copy"
    message = "`{call}` copies a tensor for a host-only library and waits for the GPU every step"
    default_enabled = False
    triggers = (b"cpu", b"force")
    invalid = [
        Invalid(
            """
            import torch
            from scipy.optimize import linear_sum_assignment

            class HungarianMatcher(torch.nn.Module):
                @torch.no_grad()
                def forward(self, outputs, targets):
                    bs, num_queries = outputs["pred_logits"].shape[:2]
                    out_prob = outputs["pred_logits"].flatten(0, 1).softmax(-1)
                    out_bbox = outputs["pred_boxes"].flatten(0, 1)
                    tgt_ids = torch.cat([v["labels"] for v in targets])
                    tgt_bbox = torch.cat([v["boxes"] for v in targets])
                    cost_class = -out_prob[:, tgt_ids]
                    cost_bbox = torch.cdist(out_bbox, tgt_bbox, p=1)
                    C = cost_bbox + cost_class
                    C = C.view(bs, num_queries, -1).cpu()
                    sizes = [len(v["boxes"]) for v in targets]
                    indices = [linear_sum_assignment(c[i]) for i, c in enumerate(C.split(sizes, -1))]
                    return [(torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(j, dtype=torch.int64))
                            for i, j in indices]
            """,
            note="DETR's Hungarian matcher: the cost matrix copied for SciPy",
        ),
        Invalid(
            """
            import cv2
            import numpy as np
            import torch
            from PIL import Image
            from scipy.optimize import linear_sum_assignment

            for step, (images, targets) in enumerate(loader):
                outputs = model(images.to(device))
                rows, cols = linear_sum_assignment(torch.cdist(outputs, targets.to(device)).cpu())
                mask = outputs.argmax(1)[0].byte().cpu().numpy()
                cv2.imwrite(f"mask_{step}.png", mask)
                Image.fromarray(outputs[0].detach().cpu().numpy())
                np.save("pred.npy", outputs.to("cpu").numpy())
            """,
            count=4,
            note="SciPy, OpenCV (through a name), PIL and NumPy",
        ),
        Invalid(
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
            note="torchmetrics' PIT: each row of the copy goes to SciPy, the result indexed",
        ),
    ]
    valid = [
        Valid(
            """
            import torch
            from scipy.optimize import linear_sum_assignment

            for images, targets in loader:
                outputs = model(images.to(device))
                cost = torch.cdist(outputs, targets.to(device))
                host = cost.cpu()
                print(host.sum())
                rows, cols = linear_sum_assignment(host)
                losses.append(outputs.mean().cpu())
            """,
            note="copies also used by host code of the step, or kept: PFL203's findings",
        ),
        Valid(
            """
            import torch
            from scipy.optimize import linear_sum_assignment

            cost = torch.cdist(a.cuda(), b.cuda())
            rows, cols = linear_sum_assignment(cost.cpu())
            """,
            note="once, not every step",
        ),
    ]

    benchmark = Benchmark(
        setup="""
            import numpy as np

            cost = torch.rand(size, size // 4, device=device)
        """,
        bad="""
            rows = np.argmin(cost.cpu().numpy(), axis=1)
            result = torch.from_numpy(rows).to(device)
        """,
        good="""
            result = cost.argmin(1)
        """,
        description="a per-row assignment computed by NumPy on a host copy vs on the device",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        label = host_copy(node, ctx)
        if label is not None and feeds_host_library(node, ctx):
            ctx.report(node, call=label)

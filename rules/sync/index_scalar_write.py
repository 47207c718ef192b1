from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.shapes import is_scalar_literal, is_simple_reference
from perflint.facts.syntax import index_parts
from perflint.facts.values import Kind
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability


def _root(part: ast.expr) -> str:
    """`i` of `i[0]` and of `i`; "" for anything else."""
    while isinstance(part, ast.Subscript) and isinstance(part.slice, ast.Constant):
        part = part.value
    return part.id if isinstance(part, ast.Name) else ""


def _element_of(name: str, scope: ast.AST | None) -> bool:
    """Is `name` bound by unpacking a tensor (`row, col = idxs[i]`) or as a loop's element
    (`for j in idx:`): likely a 0-dim element, not an index tensor? (`_, idx = x.topk(k)`
    unpacks what a call returns, `a, b = x.long(), y.long()` a tuple display: tensors.)"""
    for node in ast.walk(scope) if scope is not None and name else ():
        targets: list[ast.AST]
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Subscript, ast.Name)):
            targets = [t for target in node.targets if isinstance(target, (ast.Tuple, ast.List)) for t in target.elts]
        elif isinstance(node, (ast.For, ast.comprehension)):
            targets = list(ast.walk(node.target))
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


class ScalarWriteThroughIndex(Rule):
    """## What it does
    Checks for a Python number (or list) written into a device tensor through an integer
    index tensor, `x[idx] = 1` or `onehot[rows, labels] = 1.0`, in code that runs every
    step. The index has to be known to hold integers (`argmax`, `argsort`, `nonzero`,
    `randperm`, `.long()`...): a write through a boolean mask is `boolean-mask-indexing`'s
    (PFL214), and one of a Python number through a mask alone does not sync.

    ## Why is this bad?
    PyTorch wraps the number in a tensor on the host, and `index_put_` copies that value to
    the device before it writes (`value.to(self.device())` in `_index_put_impl_`): a blocking
    host-to-device copy, which waits for every kernel queued before it. In label assignment
    (`matching_matrix[gt_idx][pos_idx] = 1` per ground-truth box) that is one wait per write.

    ## Example
    ```python
    for images, targets in loader:
        logits = model(images.cuda())
        onehot = torch.zeros_like(logits)
        rows = torch.arange(len(logits), device=logits.device)
        onehot[rows, logits.argmax(1)] = 1.0
    ```

    ## Use instead
    ```python
    for images, targets in loader:
        logits = model(images.cuda())
        onehot = torch.zeros_like(logits)
        rows = torch.arange(len(logits), device=logits.device)
        onehot[rows, logits.argmax(1)] = onehot.new_full((), 1.0)
    ```
    `x.new_full((), v)` makes the value on the device with a fill kernel; writing a device
    value through integer indices does not wait.

    ## Fix safety
    The fix writes `x.new_full((), v)`, a 0-dim tensor of `x`'s dtype, instead of the number:
    safe. PyTorch converts the number to `x`'s dtype either way, with the same checks, so the
    results are identical, and so are the errors (`300` into a `uint8` tensor raises in both;
    `-1` wraps around to 255 in both; infinities, float16 overflow, complex tensors and
    duplicate or negative indices behave the same; `tests/test_fix_equivalence_index_write.py`).
    It is offered for a number or `True`/`False` written into a plain tensor name (a
    variable may hold a list, which `new_full` does not take).

    ## References
    - sync catalog S9: `_index_put_impl_` in ATen's TensorAdvancedIndexing.cpp copies a host
      value to the device; PyTorch PRs #186486 and #188330 (2026) remove that copy, after 2.13.
    """

    code = "PFL232"
    name = "scalar-write-through-index"
    message = ("writing a Python value through an index tensor copies it to the device first, a blocking copy "
               "that waits for the GPU every step")
    fix_availability = FixAvailability.SOMETIMES
    triggers = (b"] =", b"]=")
    invalid = [
        Invalid(
            """
            import torch

            for images, targets in loader:
                logits = model(images.cuda())
                onehot = torch.zeros_like(logits)
                rows = torch.arange(len(logits), device=logits.device)
                onehot[rows, logits.argmax(1)] = 1.0
                keep = torch.zeros(len(logits), dtype=torch.bool, device=logits.device)
                keep[logits.max(1).values.argsort()[:8]] = True
            """,
            count=2,
            fixed="""
            import torch

            for images, targets in loader:
                logits = model(images.cuda())
                onehot = torch.zeros_like(logits)
                rows = torch.arange(len(logits), device=logits.device)
                onehot[rows, logits.argmax(1)] = onehot.new_full((), 1.0)
                keep = torch.zeros(len(logits), dtype=torch.bool, device=logits.device)
                keep[logits.max(1).values.argsort()[:8]] = keep.new_full((), True)
            """,
        ),
        Invalid(
            """
            import torch

            class Assigner(torch.nn.Module):
                def forward(self, cost, num_gt: int):
                    matching = torch.zeros_like(cost)
                    for g in range(num_gt):
                        pos = cost[g].argsort()[:10]
                        matching[g][pos] = 1
                    return matching
            """,
            count=1,
            note="YOLOX's SimOTA matching: one write, and one wait, per ground-truth box",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for images, targets in loader:
                logits = model(images.cuda())
                out = torch.zeros_like(logits)
                out[logits > 0] = 1.0
                out[:, 0] = 0.0
                out[3] = 2.0
                idx = logits.argmax(1)
                out[idx] = logits.new_ones(())
                out[idx] += 1
            """,
            note="a mask alone (masked_fill_), slices and ints, a device value, an in-place update",
        ),
        Valid(
            """
            import numpy as np
            import torch

            for images, targets in loader:
                scores = model(images.cuda()).cpu()
                top = scores.argsort(1)[:, :5]
                hits = torch.zeros_like(scores)
                hits[top] = 1
                arr = np.zeros(10)
                arr[np.argsort(arr)] = 1
            """,
            note="host tensors and numpy arrays",
        ),
        Valid(
            """
            import torch

            logits = model(images.cuda())
            onehot = torch.zeros_like(logits)
            onehot[logits.argmax(1)] = 1.0
            """,
            note="once, not in a loop",
        ),
        Valid(
            """
            import torch

            for images, targets in loader:
                q = model(images.cuda())
                ind = torch.nonzero(torch.isinf(q))
                for i in ind:
                    q[i[0], i[1]] = 0
                for k in range(len(ind)):
                    row, col = ind[k]
                    q[row, col] = 0
            """,
            note="elements of an index tensor (0-dim: each is read with `item()`, tensor-as-index's)",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.zeros(size, size, device=device)
            idx = torch.randperm(size, device=device)[: size // 2]
        """,
        bad="""
            x[idx] = 1.0
            result = x
        """,
        good="""
            x[idx] = x.new_full((), 1.0)
            result = x
        """,
        description="a Python number vs a device value written through an integer index tensor",
    )

    def visit_Assign(self, node: ast.Assign, ctx: RuleContext) -> None:
        value = node.value
        python = is_scalar_literal(value) or ctx.value(value).kind is Kind.PYTHON
        if not python:
            return
        for target in node.targets:
            if isinstance(target, ast.Subscript) and ctx.is_tensor(target.value) \
                    and self._integer_index(target.slice, ctx):
                fix = self._fix(node, target, ctx) if len(node.targets) == 1 else None
                ctx.report(target, fix=fix)

    @staticmethod
    def _integer_index(index: ast.expr, ctx: RuleContext) -> bool:
        """Index tensors known to hold integers, on the device, and no mask among them."""
        parts = index_parts(index)
        values = [ctx.value(p) for p in parts]
        if any(v.kind is Kind.TENSOR and v.dtype != "int" and not v.zero_dim for v in values):
            return False  # a mask (PFL214's), or an index of unknown dtype: it may be one
        if not any(v.kind is Kind.TENSOR and v.dtype == "int" and not v.zero_dim and not v.on_cpu for v in values):
            return False
        # `row, col = idxs[i]`, `for i in ind: x[i[0], i[1]]`: 0-dim, read with `item()`
        return not any(_element_of(_root(p), ctx.function_node) for p in parts)

    def _fix(self, node: ast.Assign, target: ast.Subscript, ctx: RuleContext):
        value = node.value
        if not is_simple_reference(target.value) or not is_scalar_literal(value):
            return None
        text = f"{ctx.text(target.value)}.new_full((), {ctx.text(value)})"
        return ctx.fix(Applicability.SAFE, "Write a device value made with `new_full`",
                       [ctx.replace(value, text)])

from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.shapes import is_simple_reference, mask_has_shape_of, same_expression
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

_CLASSIFICATION_LOSSES = ("torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss")


def mask_in_index(index: ast.expr, ctx: RuleContext) -> ast.expr | None:
    """The boolean-tensor part of a subscript (`x[m]`, `x[:, m]`, `x[m, 0]`), if any."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    for part in parts:
        if not isinstance(part, ast.Slice) and ctx.is_bool_tensor(part):
            return part
    return None


class BooleanMaskIndexing(Rule):
    """## What it does
    Checks for indexing a tensor with a boolean mask in code that runs every step: reads
    (`x[mask]`, `x[:, mask]`), in-place updates (`x[mask] += v`) and writes of a tensor value
    (`x[mask] = y[mask]`, `x[mask] = t`).

    Writing a Python number (`x[mask] = 0.0`) is not reported: PyTorch turns it into
    `masked_fill_`, which does not sync.

    ## Why is this bad?
    A boolean index is converted to integer indices with `mask.nonzero()`: the result size
    depends on the data, so the count is copied to the host and the CPU waits for the GPU.

    ## Example
    ```python
    for x, y in loader:
        logits = model(x)
        valid = y != IGNORE
        loss = criterion(logits[valid], y[valid])
    ```

    ## Use instead
    ```python
    for x, y in loader:
        logits = model(x)
        loss = F.cross_entropy(logits, y, ignore_index=IGNORE)
    ```
    Or keep shapes static with `torch.where(mask, x, 0)`, `masked_fill`, or multiply by the
    mask when summing.

    ## Fix safety
    Reads that build a tensor of data-dependent size have no automatic fix: the shape of the
    result changes. These uses do:
    - Writes: `x[m] = v` with a 0-dim tensor `v`, and `x[m] = y[m]`, become
      `x.copy_(torch.where(m, v.to(x.dtype), x))` (in place, like the original, with the cast
      indexing does). Exact when `m` has the shape of `x` (then `y` must too, or the original
      fails): safe when that is provable, because `m` is computed elementwise from `x` and
      Python numbers (`x > 0`, `torch.isnan(x)`); unsafe otherwise. Where the original raises
      (`y` of another dtype: "Index put requires the source and destination dtypes match"),
      the fixed code runs.
    - Counts: `len(x[m])`, `x[m].shape[0]` and `x[m].size(0)` (and `x[m].numel()` when `m` has
      the shape of `x`) become `torch.count_nonzero(m)`: the same number as a 0-dim tensor
      instead of a Python `int`. Unsafe: code that needs an `int` syncs there instead, or fails.
    - Losses: `F.cross_entropy(logits[k], y[k])` (and `nll_loss`) becomes
      `F.cross_entropy(logits, torch.where(k, y, -100), ignore_index=-100)` (or the
      `ignore_index` already given). For `reduction` "mean" (the default) or "sum", with or
      without `weight=` and `label_smoothing=`, the loss is the same (measured difference
      ≤ 4.4e-16 in float64; a mask that selects nothing gives NaN in both). Unsafe, because it
      is only exact when `logits` is `(N, C)` and `k` selects samples (rows); a mask over other
      dimensions, or logits with the class dimension last, need a different rewrite.

    ## References
    - `expandTensors` in ATen/native/IndexingUtils.h turns boolean indices into `nonzero()`.
    """

    code = "PFL214"
    name = "boolean-mask-indexing"
    fix_availability = FixAvailability.SOMETIMES
    message = "indexing with a boolean mask calls `nonzero()` and waits for the GPU every step"
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                keep = y >= 0
                loss = criterion(out[keep], y[keep])
            """,
            count=2,
        ),
        Invalid(
            """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x, y):
                    x[y > 0] = y[y > 0]
                    x[torch.isnan(x)] += 1
                    return x[:, x.sum(0) > 0]
            """,
            count=4,
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            for x, y in loader:
                out = model(x)
                out[torch.isnan(out)] = out.mean()
                labeled = y >= 0
                loss = F.cross_entropy(out[labeled], y[labeled], label_smoothing=0.1)
                n = len(y[labeled])
            """,
            count=4,
            unsafe_fixes=True,
            fixed="""
            import torch
            import torch.nn.functional as F

            for x, y in loader:
                out = model(x)
                out.copy_(torch.where(torch.isnan(out), out.mean().to(out.dtype), out))
                labeled = y >= 0
                loss = F.cross_entropy(out, torch.where(labeled, y, -100), ignore_index=-100, label_smoothing=0.1)
                n = torch.count_nonzero(labeled)
            """,
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                out = model(x)
                out[y < 0] = 0.0
                out[torch.isnan(out)] = -1
            """,
            note="writing a Python scalar uses masked_fill_, no sync",
        ),
        Valid(
            """
            import numpy as np

            for x, y in loader:
                a = np.arange(10)
                b = a[a > 3]
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                idx = torch.argsort(y)
                z = x[idx]
            """,
            note="integer index tensors gather without a sync",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            logits = torch.randn(size, 10, device=device)
            y = torch.randint(-1, 10, (size,), device=device)
        """,
        bad="""
            valid = y != -1
            loss = torch.nn.functional.cross_entropy(logits[valid], y[valid])
            result = loss
        """,
        good="""
            valid = y != -1
            loss = torch.nn.functional.cross_entropy(logits, torch.where(valid, y, -100), ignore_index=-100)
            result = loss
        """,
        description="cross-entropy over `logits[mask]` vs `ignore_index` (the fix's output)",
        compare="close",
    )

    def visit_Subscript(self, node: ast.Subscript, ctx: RuleContext) -> None:
        if isinstance(node.ctx, ast.Load) and self._mask_read(node, ctx) is not None:
            ctx.report(node)
        # x[m].shape[0]: a count
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "shape" and _is_zero(node.slice):
            self._count(value.value, node, ctx)

    def _mask_read(self, node: ast.AST, ctx: RuleContext) -> ast.expr | None:
        if not isinstance(node, ast.Subscript) or not isinstance(node.ctx, ast.Load):
            return None
        mask = mask_in_index(node.slice, ctx)
        if mask is not None and ctx.maybe_tensor(node.value):
            return mask
        return None

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name in _CLASSIFICATION_LOSSES:
            self._masked_loss(node, ctx)
        elif name == "builtins.len" and len(node.args) == 1 and not node.keywords:
            self._count(node.args[0], node, ctx)
        elif isinstance(node.func, ast.Attribute) and not node.keywords:
            if node.func.attr == "size" and len(node.args) == 1 and _is_zero(node.args[0]):
                self._count(node.func.value, node, ctx)
            elif node.func.attr == "numel" and not node.args:
                self._count(node.func.value, node, ctx, whole_tensor=True)

    def _count(self, inner: ast.expr, whole: ast.expr, ctx: RuleContext, whole_tensor: bool = False) -> None:
        """`len(x[m])`, `x[m].shape[0]`, `x[m].size(0)`, `x[m].numel()` -> count_nonzero(m)."""
        mask = self._mask_read(inner, ctx)
        if mask is None or not isinstance(inner, ast.Subscript) or isinstance(inner.slice, ast.Tuple):
            return
        if whole_tensor and not mask_has_shape_of(mask, inner.value, ctx.qualname):
            return  # numel of x[m] counts trailing elements too unless m has x's shape
        torch = ctx.torch_alias()
        fix = ctx.fix(
            Applicability.UNSAFE,
            "Count the mask on the device with `torch.count_nonzero`",
            [ctx.replace(whole, f"{torch or 'torch'}.count_nonzero({ctx.text(mask)})")],
            imports=[] if torch else ["torch"],
        )
        ctx.report(inner, fix=fix)

    def _masked_loss(self, node: ast.Call, ctx: RuleContext) -> None:
        """`F.cross_entropy(logits[k], y[k])` -> ignore the masked-out targets instead."""
        if len(node.args) != 2 or any(kw.arg is None for kw in node.keywords):
            return
        logits, target = node.args
        mask_l, mask_t = self._mask_read(logits, ctx), self._mask_read(target, ctx)
        if mask_l is None or mask_t is None or not same_expression(mask_l, mask_t):
            return
        assert isinstance(logits, ast.Subscript) and isinstance(target, ast.Subscript)
        if isinstance(logits.slice, ast.Tuple) or isinstance(target.slice, ast.Tuple):
            return
        keywords = {kw.arg: kw.value for kw in node.keywords}
        reduction = keywords.get("reduction")
        if reduction is not None and not (
            isinstance(reduction, ast.Constant) and reduction.value in ("mean", "sum")
        ):
            return
        torch = ctx.torch_alias()
        t = torch or "torch"
        ignore = keywords.get("ignore_index")
        ignore_text = ctx.text(ignore) if ignore is not None else "-100"
        start, _ = ctx.offsets(logits)
        _, end = ctx.offsets(target)
        new_args = (f"{ctx.text(logits.value)}, "
                    f"{t}.where({ctx.text(mask_t)}, {ctx.text(target.value)}, {ignore_text})")
        edits = [(start, end, new_args)]
        if ignore is None:
            edits.append(ctx.insert_at(end, ", ignore_index=-100"))
        fix = ctx.fix(
            Applicability.UNSAFE,
            "Ignore masked-out targets with `ignore_index` instead of selecting rows",
            edits,
            imports=[] if torch else ["torch"],
        )
        ctx.report(logits, fix=fix)

    def visit_Assign(self, node: ast.Assign, ctx: RuleContext) -> None:
        for target in node.targets:
            if not isinstance(target, ast.Subscript):
                continue
            mask = mask_in_index(target.slice, ctx)
            if mask is None or not ctx.maybe_tensor(target.value):
                continue
            if ctx.is_tensor(node.value):
                fix = self._write_fix(node, target, mask, ctx) if len(node.targets) == 1 else None
                ctx.report(target, "writing a tensor through a boolean mask calls `nonzero()` and waits for the GPU every step", fix=fix)

    def _write_fix(self, node: ast.Assign, target: ast.Subscript, mask: ast.expr, ctx: RuleContext):
        """`x[m] = v` (0-dim v) and `x[m] = y[m]` -> `x.copy_(torch.where(m, ..., x))`."""
        x = target.value
        if isinstance(target.slice, ast.Tuple) or not is_simple_reference(x):
            return None
        value = node.value
        source: ast.expr | None = None
        if isinstance(value, ast.Subscript) and same_expression(value.slice, target.slice) \
                and not isinstance(value.slice, ast.Tuple):
            source = value.value  # x[m] = y[m]
        elif ctx.value(value).zero_dim:
            source = value
        if source is None:
            return None
        torch = ctx.torch_alias()
        t = torch or "torch"
        x_text = ctx.text(x)
        src = ctx.text(source)
        if not isinstance(source, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
            src = f"({src})"
        text = f"{x_text}.copy_({t}.where({ctx.text(mask)}, {src}.to({x_text}.dtype), {x_text}))"
        safe = mask_has_shape_of(mask, x, ctx.qualname)
        return ctx.fix(
            Applicability.SAFE if safe else Applicability.UNSAFE,
            "Write through the mask with `torch.where` (no `nonzero()`)",
            [ctx.replace(node, text)],
            imports=[] if torch else ["torch"],
        )

    def visit_AugAssign(self, node: ast.AugAssign, ctx: RuleContext) -> None:
        target = node.target
        if isinstance(target, ast.Subscript) and mask_in_index(target.slice, ctx) is not None \
                and ctx.maybe_tensor(target.value):
            ctx.report(target, "updating through a boolean mask calls `nonzero()` and waits for the GPU every step")


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)

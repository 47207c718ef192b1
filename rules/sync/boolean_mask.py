from __future__ import annotations

import ast
import copy

from perflint.facts.context import RuleContext
from perflint.facts.shapes import is_scalar_literal, is_simple_reference, mask_has_shape_of, same_expression
from perflint.facts.syntax import index_parts
from perflint.facts.values import Kind
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import operand_text, receiver_text

_CLASSIFICATION_LOSSES = ("torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss")


def mask_in_index(index: ast.expr, ctx: RuleContext) -> ast.expr | None:
    """The boolean-tensor part of a subscript (`x[m]`, `x[:, m]`, `x[m, 0]`), if any."""
    return next((part for part in index_parts(index) if ctx.is_bool_tensor(part)), None)


def _other_index_tensor(index: ast.expr, mask: ast.expr, ctx: RuleContext) -> bool:
    """`x[rows, mask]`: an index tensor beside the mask, which keeps a write of a Python
    number from becoming `masked_fill_` (PyTorch's `canDispatchToMaskedFill` takes one mask)."""
    return isinstance(index, ast.Tuple) and any(
        part is not mask and ctx.value(part).kind is Kind.TENSOR and not ctx.value(part).zero_dim
        for part in index_parts(index))


class BooleanMaskIndexing(Rule):
    """## What it does
    Checks for indexing a tensor with a boolean mask in code that runs every step: reads
    (`x[mask]`, `x[:, mask]`), in-place updates (`x[mask] += v`) and writes of a tensor value
    (`x[mask] = y[mask]`, `x[mask] = t`).

    Writing a Python number (`x[mask] = 0.0`, `x[:, mask] = 0.0`) is not reported: PyTorch
    turns it into `masked_fill_`, which does not sync. With another index tensor beside the
    mask (`x[rows, mask] = 1`) it cannot, and the mask goes through `nonzero()`: reported.

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
    Or keep shapes static: `torch.where(mask, x, 0).sum()` instead of `x[mask].sum()`,
    `((a == b) & mask).sum()` instead of `(a[mask] == b[mask]).sum()`, `masked_fill`.

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
      So there is no fix when the count is read on the host in the loop that computes it
      (`if`/`while`/`assert`, `not`/`and`/`or`, `int()`/`range()`/`len()`, formatting,
      `.item()`, an index, or an argument of any call, followed through a name it is
      assigned to): the sync would only move. An accumulator (`labeled += len(x[m])`)
      becomes a 0-dim tensor; it is fixed only when it is read on the host after the loop
      (once), and arithmetic on it then gives tensors (`correct / labeled` is a float32
      tensor instead of a Python float).
    - Reductions of a selection keep the shape static. A mask that is not provably of `x`'s
      shape (and is a plain name) is widened to `m.reshape(m.shape + (1,) * (x.dim() - m.dim()))`,
      which selects whole rows like indexing does when `m` covers the leading dimensions:
      - `x[m].sum()` (`torch.sum(x[m])`, `.nansum()`, `.count_nonzero()`) becomes
        `torch.where(m, x, 0).sum()`. Exact for integer and bool `x` (any order gives the same
        integer sum; bool sums to int64 in both): safe when the dtype is known. For floating
        `x` the same values are added in another order, with zeros in between: close, not
        bit-exact (tested to rtol 1e-5 in float32, 1e-2 in float16), so unsafe. NaN and inf
        in masked-out positions are dropped by both. Nothing selected: 0 in both.
      - `x[m].mean()` becomes `torch.where(m, x, 0).sum() / torch.count_nonzero(m)`, only when
        `m` provably has `x`'s shape. Unsafe: close, not bit-exact. Nothing selected: NaN in
        both. Integer `x`: the original raises, the fix returns the mean as a float.
      - `x[m].max()` / `.min()` / `.amax()` / `.amin()`, only for `x` known to be floating,
        become `torch.where(m, x, float("-inf")).max()` (`inf` for min). Exact when something
        is selected; when nothing is, the original raises and the fix returns -inf (inf);
        an empty `x` raises in both. Unsafe. No fix when the dtype is unknown (an integer `x` needs another fill value).
      - Counts of matches: `(a[m] == b[m]).sum()` (any comparison, a Python number on one
        side allowed; also `torch.count_nonzero(...)` of it) becomes `((a == b) & m).sum()`,
        an exact integer count when the selected tensors have the same shape. Safe when that
        is provable (the mask is computed elementwise from each of them, through a name
        bound once and module-level number constants: `keep = y != IGNORE`) or when only one
        tensor is selected; unsafe otherwise (an `a` of another shape broadcasts
        differently before and after selection).
      - Accuracies: `(a[m] == b[m]).float().mean()` (or `.double()`) becomes
        `((a == b) & m).sum().float() / torch.count_nonzero(m)`, when the mask provably has
        the shape of one of them (same condition as the counts). Bit-identical on the CPU
        (both round k/n once; checked up to 10^6 elements); CUDA's `mean` multiplies by 1/n
        instead, and the last bit differed for 98 of 403 sizes on an H100: unsafe. Nothing selected: NaN in both.
      On an H100 (torch 2.11), `set_sync_debug_mode("error")` raised for each original form
      and for none of these rewrites (`tests/gpu_check_masked_rewrites.py`).
      A reduction read on the host afterwards (`x[m].sum().item()`) still syncs there: the
      fix removes the `nonzero()`, not that read (PFL201 reports it).
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
        Invalid(
            """
            import torch

            for x, y in loader:
                pred = model(x).argmax(1)
                keep = y != 255
                correct = (pred[keep] == y[keep]).sum()
                positives = (y[keep] > 0).sum()
                total = y[keep].sum()
                n = len(y[keep])
                if n > 10:
                    print("many")
            """,
            count=5,
            unsafe_fixes=True,
            fixed="""
            import torch

            for x, y in loader:
                pred = model(x).argmax(1)
                keep = y != 255
                correct = ((pred == y) & keep).sum()
                positives = ((y > 0) & keep).sum()
                total = torch.where(keep, y, 0).sum()
                n = len(y[keep])
                if n > 10:
                    print("many")
            """,
            note="masked reductions keep shapes static; a count read by `if` keeps its sync (no fix)",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                cost = model(x.cuda())
                matching = torch.zeros_like(cost)
                multiple = matching.sum(0) > 1
                _, best = torch.min(cost[:, multiple], dim=0)
                matching[best, multiple] = 1
            """,
            count=2,
            note="a Python number written through a mask beside an index tensor (YOLOX's SimOTA)",
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
        Valid(
            """
            import torch

            for x, y in loader:
                scores = model(x.cuda())
                multiple = scores.sum(0) > 1
                scores[:, multiple] = 0
                scores[0, multiple] = 1
            """,
            note="a Python number written through one mask, beside slices and ints: `masked_fill_`",
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
        elif name in ("torch.sum", "torch.count_nonzero") and len(node.args) == 1 and not node.keywords:
            self._reduction(node.args[0], name.rsplit(".", 1)[1], node, ctx)
        elif isinstance(node.func, ast.Attribute) and not node.keywords:
            if node.func.attr == "size" and len(node.args) == 1 and _is_zero(node.args[0]):
                self._count(node.func.value, node, ctx)
            elif node.func.attr == "numel" and not node.args:
                self._count(node.func.value, node, ctx, whole_tensor=True)
            elif node.func.attr in _REDUCTIONS and not node.args and name is None:
                self._reduction(node.func.value, node.func.attr, node, ctx)

    def _count(self, inner: ast.expr, whole: ast.expr, ctx: RuleContext, whole_tensor: bool = False) -> None:
        """`len(x[m])`, `x[m].shape[0]`, `x[m].size(0)`, `x[m].numel()` -> count_nonzero(m)."""
        mask = self._mask_read(inner, ctx)
        if mask is None or not isinstance(inner, ast.Subscript) or isinstance(inner.slice, ast.Tuple):
            return
        if whole_tensor and not mask_has_shape_of(mask, inner.value, ctx.qualname):
            return  # numel of x[m] counts trailing elements too unless m has x's shape
        if ctx.reaches_host(whole):
            return  # the count would be read back on the host: the sync would only move
        torch = ctx.torch_alias()
        fix = ctx.fix(
            Applicability.UNSAFE,
            "Count the mask on the device with `torch.count_nonzero`",
            [ctx.replace(whole, f"{torch or 'torch'}.count_nonzero({ctx.text(mask)})")],
            imports=[] if torch else ["torch"],
        )
        ctx.report(inner, fix=fix)

    def _reduction(self, inner: ast.expr, reduction: str, whole: ast.Call, ctx: RuleContext) -> None:
        """`x[m].sum()` & co. -> a reduction over `torch.where(m, x, <neutral>)`, and
        `(a[m] == b[m]).sum()` -> `((a == b) & m).sum()`: the same shapes every step."""
        if isinstance(inner, ast.Compare):
            if reduction in ("sum", "count_nonzero"):
                self._compare_count(inner, ctx)
            return
        if reduction == "mean" and isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
                and inner.func.attr in ("float", "double") and not inner.args and not inner.keywords \
                and isinstance(inner.func.value, ast.Compare):
            self._compare_count(inner.func.value, ctx, mean=(whole, inner.func.attr))
            return
        mask = self._mask_read(inner, ctx)
        if mask is None or not isinstance(inner, ast.Subscript) or isinstance(inner.slice, ast.Tuple):
            return
        x = inner.value
        if not is_simple_reference(x):
            return  # repeated in the rewrite
        dtype = ctx.value(x).dtype
        provable = has_shape_of(mask, x, ctx)
        if not provable and not is_simple_reference(mask):
            return  # the widened mask repeats it three times
        t, imports = _torch(ctx)
        m = _mask_for(mask, x, provable, ctx)
        xt = ctx.text(x)
        if reduction in ("sum", "nansum", "count_nonzero"):
            text = f"{t}.where({m}, {xt}, 0).{reduction}()"
            # integer (and bool) sums are exact in any order; float sums are not
            safe = dtype in ("int", "bool") and reduction != "nansum"
            if reduction == "count_nonzero":
                safe = True
        elif reduction == "mean":
            if not provable:
                return  # the divisor would be the count of rows times the trailing sizes
            text = f"{t}.where({m}, {xt}, 0).sum() / {t}.count_nonzero({m})"
            parent = ctx.parent(whole)
            if not (isinstance(parent, (ast.Assign, ast.AugAssign, ast.Return)) or
                    (isinstance(parent, ast.Call) and any(a is whole for a in parent.args))):
                text = f"({text})"
            safe = False
        else:  # max / min / amax / amin
            if dtype != "float":
                return  # an integer fill value needs the dtype; no fix without it
            fill = '"-inf"' if reduction in ("max", "amax") else '"inf"'
            text = f"{t}.where({m}, {xt}, float({fill})).{reduction}()"
            safe = False
        fix = ctx.fix(
            Applicability.SAFE if safe else Applicability.UNSAFE,
            "Reduce over `torch.where(mask, x, ...)` instead of `x[mask]` (no `nonzero()`)",
            [ctx.replace(whole, text)],
            imports=imports,
        )
        ctx.report(inner, fix=fix)

    def _compare_count(self, compare: ast.Compare, ctx: RuleContext,
                       mean: tuple[ast.Call, str] | None = None) -> None:
        """`(a[m] == b[m]).sum()`, `(x[m] > 0).sum()` -> count `(a == b) & m`; with `mean`
        (the `.mean()` call and the cast), `(a[m] == b[m]).float().mean()` -> that count,
        cast, over `torch.count_nonzero(m)`."""
        if len(compare.ops) != 1 or not type(compare.ops[0]) in _COUNTED_COMPARISONS:
            return
        operands = [compare.left, compare.comparators[0]]
        reads: list[ast.Subscript] = []
        mask: ast.expr | None = None
        for operand in operands:
            if is_scalar_literal(operand):
                continue
            found = self._mask_read(operand, ctx)
            if found is None or not isinstance(operand, ast.Subscript) or isinstance(operand.slice, ast.Tuple):
                return
            if mask is not None and not same_expression(mask, found):
                return
            if not is_simple_reference(operand.value):
                return
            mask = found
            reads.append(operand)
        if mask is None:
            return
        proven = [has_shape_of(mask, r.value, ctx) for r in reads]
        if not any(proven) and (mean is not None or not is_simple_reference(mask)):
            return  # a widened mask repeats it; a mean also needs the count of selected elements
        if any(proven):
            m = _mask_for(mask, reads[0].value, True, ctx)
        else:
            m = _mask_for(mask, reads[0].value, False, ctx)
        # exact when every selected tensor has the same shape: provable, or only one of them
        safe = all(proven) or len(reads) == 1
        op = _COUNTED_COMPARISONS[type(compare.ops[0])]
        sides = [ctx.text(o.value) if isinstance(o, ast.Subscript) else operand_text(ctx, o, comparison=True)
                 for o in operands]
        if any(proven) and not isinstance(mask, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
            m = f"({m})"
        text = f"({sides[0]} {op} {sides[1]}) & {m}"
        imports: list[str] = []
        if mean is None:
            edit = ctx.replace(compare, text)
        else:
            whole, cast = mean
            t, imports = _torch(ctx)
            fraction = f"(({text}).sum().{cast}() / {t}.count_nonzero({ctx.text(mask)}))"
            parent = ctx.parent(whole)
            if isinstance(parent, (ast.Assign, ast.AugAssign, ast.Return)) or \
                    (isinstance(parent, ast.Call) and any(a is whole for a in parent.args)):
                fraction = fraction[1:-1]
            edit = ctx.replace(whole, fraction)
            safe = False  # the division rounds like `mean` on the CPU; CUDA's mean multiplies by 1/n
        fix = ctx.fix(
            Applicability.SAFE if safe else Applicability.UNSAFE,
            "Count the matches inside the mask (`(a == b) & mask`) instead of selecting first",
            [edit],
            imports=imports,
        )
        ctx.report(reads[0], fix=fix)

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
            elif _other_index_tensor(target.slice, mask, ctx):
                ctx.report(target, "writing through a boolean mask beside another index tensor calls `nonzero()` "
                                   "and waits for the GPU every step (only a mask alone becomes `masked_fill_`)")

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


_REDUCTIONS = ("sum", "nansum", "mean", "max", "min", "amax", "amin", "count_nonzero")
_COUNTED_COMPARISONS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def has_shape_of(mask: ast.expr, x: ast.expr, ctx: RuleContext) -> bool:
    """`mask_has_shape_of`, also through a mask bound once to a name in this function
    (`keep = y != IGNORE; ... y[keep]`) and through names bound once to a number
    (`IGNORE = 255` at module level). `x`'s name must be bound at most once in the function
    as well, so that the mask was computed from the same tensor."""
    if mask_has_shape_of(mask, x, ctx.qualname):
        return True
    if not isinstance(mask, ast.Name) or not is_simple_reference(x):
        return False
    scope = ctx.function_node or ctx.analysis.tree
    root = x
    while isinstance(root, ast.Attribute):
        root = root.value
    assert isinstance(root, ast.Name)
    if isinstance(x, ast.Attribute) or _stores(root.id, scope) > 1:
        return False
    value = _single_assignment(mask.id, scope)
    if value is None or not value.lineno <= x.lineno:
        return False
    # `x` bound (if at all) before the mask is computed from it
    if any(isinstance(sub, ast.Name) and sub.id == root.id and not isinstance(sub.ctx, ast.Load)
           and sub.lineno >= value.lineno for sub in ast.walk(scope)):
        return False
    resolved = _Constants(ctx, scope, {root.id}).visit(copy.deepcopy(value))
    return mask_has_shape_of(resolved, x, ctx.qualname)


def _stores(name: str, scope: ast.AST) -> int:
    count = 0
    for sub in ast.walk(scope):
        if isinstance(sub, ast.Name) and sub.id == name and not isinstance(sub.ctx, ast.Load):
            count += 1
        elif isinstance(sub, (ast.Global, ast.Nonlocal)) and name in sub.names:
            return 99
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and sub is not scope:
            args = sub.args
            if any(a.arg == name for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]):
                return 99
    return count


def _single_assignment(name: str, scope: ast.AST) -> ast.expr | None:
    """The value of the one `name = <value>` in `scope`, when nothing else binds `name`."""
    if _stores(name, scope) != 1:
        return None
    for sub in ast.walk(scope):
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name) \
                and sub.targets[0].id == name:
            return sub.value
    return None


class _Constants(ast.NodeTransformer):
    """Names bound once to a number (in the function, or at module level) become that number."""

    def __init__(self, ctx: RuleContext, scope: ast.AST, keep: set[str]) -> None:
        self.ctx, self.scope, self.keep = ctx, scope, keep

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.keep or not isinstance(node.ctx, ast.Load):
            return node
        module = self.ctx.analysis.tree
        for scope in (self.scope, module):
            if scope is not module and _stores(node.id, scope):
                value = _single_assignment(node.id, scope)
                return value if value is not None and is_scalar_literal(value) else node
            if scope is module:
                top = [s for s in module.body if isinstance(s, ast.Assign) and len(s.targets) == 1
                       and isinstance(s.targets[0], ast.Name) and s.targets[0].id == node.id]
                value = _single_assignment(node.id, module)
                if top and value is top[0].value and is_scalar_literal(value):
                    return value
        return node


def _torch(ctx: RuleContext) -> tuple[str, list[str]]:
    alias = ctx.torch_alias()
    return (alias or "torch"), ([] if alias else ["torch"])


def _mask_for(mask: ast.expr, x: ast.expr, provable: bool, ctx: RuleContext) -> str:
    """The mask as an operand that selects what `x[mask]` selects: itself when it has `x`'s
    shape, else widened with trailing size-1 dimensions (a mask over the leading dimensions
    of `x` selects whole rows)."""
    if provable:
        return ctx.text(mask)
    m = receiver_text(ctx, mask)
    xt = ctx.text(x)
    return f"{m}.reshape({m}.shape + (1,) * ({xt}.dim() - {m}.dim()))"


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)

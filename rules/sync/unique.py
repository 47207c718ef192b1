from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import device_input, device_tensor, literal, opaque_arguments, receiver_text

_FUNCTIONS = {
    "torch.unique": "unique",
    "torch.unique_consecutive": "unique_consecutive",
    "torch.functional.unique": "unique",
    "torch.functional.unique_consecutive": "unique_consecutive",
}
_METHODS = ("unique", "unique_consecutive")
# Counting: the number of changes between neighbours, plus one unless the input is empty.
_COUNT = "(lambda s: (s[1:] != s[:-1]).sum() + (s.numel() > 0))({values})"


class Unique(Rule):
    """## What it does
    Checks for `torch.unique`, `Tensor.unique()` (with or without `dim=`),
    `torch.unique_consecutive` and `Tensor.unique_consecutive()` in code that runs every step.

    ## Why is this bad?
    The number of unique values decides the size of the result, and only the GPU knows it:
    PyTorch counts on the device and copies the count to the host (`num_out = length.item()`
    in the CUDA implementation) before it can allocate the output. That copy waits for every
    kernel queued before it.

    ## Example
    ```python
    for images, masks in loader:
        logits = model(images)
        num_present = torch.unique(masks).numel()
        loss = criterion(logits, masks) / num_present
    ```

    ## Use instead
    Count on the device with a sort, or use the number of classes, which is known on the
    host:
    ```python
    for images, masks in loader:
        logits = model(images)
        s = masks.flatten().sort().values
        num_present = (s[1:] != s[:-1]).sum() + 1
        loss = criterion(logits, masks) / num_present
    ```

    ## Fix safety
    When the unique values are only counted (`torch.unique(x).numel()`, `len(torch.unique(x))`,
    `x.unique().shape[0]`, `.size(0)`, and the same for `unique_consecutive`), the fix counts
    them on the device instead: it sorts the flattened values and counts the neighbours that
    differ, `(lambda s: (s[1:] != s[:-1]).sum() + (s.numel() > 0))(x.flatten().sort().values)`
    (no sort for `unique_consecutive`). The count is exactly the same for every input,
    including bool, integer and floating dtypes, `±0` (one value), `±inf`, NaN (PyTorch
    counts every NaN as a distinct value, and so does `!=`), 0-dim and empty tensors.

    The fix is unsafe because the result is a 0-dim `int64` tensor on the input's device
    instead of a Python `int` (`count == k` gives a tensor; `json.dumps` fails). It is offered
    only when nothing reads the count to the host again as often as it is made (`if n > 1:`,
    `range(n)`, `int(n)`, formatting, a non-torch call: there the sync would only move), when
    the count is the only use of the unique values, and when `sorted`, `return_inverse=False`,
    `return_counts=False`, `dim=None` are the only other arguments.

    ## References
    - `unique_cuda_template` in aten/src/ATen/native/cuda/UniqueCub.cu reads the number of
      unique values with `.item()`.
    """

    code = "PFL212"
    name = "unique"
    message = "`{call}` sizes its output from data on the GPU and waits for it every step"
    triggers = (b"unique",)
    fix_availability = FixAvailability.SOMETIMES
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                classes = torch.unique(y)
                runs = torch.unique_consecutive(y)
            """,
            count=2,
        ),
        Invalid(
            """
            import torch as T
            from torch import unique as uq

            class Head(T.nn.Module):
                def forward(self, x, labels):
                    a = labels.unique()
                    b = labels.unique(dim=0)
                    c = uq(labels, return_counts=True)
                    d = T.Tensor.unique(labels, sorted=False)
                    e = labels.unique_consecutive()
                    return a, b, c, d, e
            """,
            count=5,
            note="aliases, the method and the unbound method forms",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                n = torch.unique(y).numel()
                m = len(y.unique())
                k = torch.unique(y, sorted=True).shape[0]
                r = y.unique_consecutive().size(0)
            """,
            count=4,
            fixed="""
            import torch

            for x, y in loader:
                n = (lambda s: (s[1:] != s[:-1]).sum() + (s.numel() > 0))(y.flatten().sort().values)
                m = (lambda s: (s[1:] != s[:-1]).sum() + (s.numel() > 0))(y.flatten().sort().values)
                k = (lambda s: (s[1:] != s[:-1]).sum() + (s.numel() > 0))(y.flatten().sort().values)
                r = (lambda s: (s[1:] != s[:-1]).sum() + (s.numel() > 0))(y.flatten())
            """,
            unsafe_fixes=True,
            note="counts get an on-device count (unsafe: a tensor instead of an int)",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                n = torch.unique(y).numel()
            """,
            fixed="""
            import torch

            for x, y in loader:
                n = torch.unique(y).numel()
            """,
            note="the fix is unsafe: a safe-only run leaves the code alone",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                values, counts = torch.unique(y, return_counts=True)
                n = torch.unique(y, dim=0).numel()
                total = torch.unique(y + 1).numel() * 2
            """,
            count=3,
            fixed="""
            import torch

            for x, y in loader:
                values, counts = torch.unique(y, return_counts=True)
                n = torch.unique(y, dim=0).numel()
                total = (lambda s: (s[1:] != s[:-1]).sum() + (s.numel() > 0))(
                    (y + 1).flatten().sort().values
                ) * 2
            """,
            unsafe_fixes=True,
            note="no count fix with return_counts or dim (rows, not values)",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                n = torch.unique(y).numel()
                if n > 1:
                    loss = criterion(model(x), y)
                weights = torch.ones(len(y.unique()))
            """,
            count=2,
            unsafe_fixes=True,
            fixed="""
            import torch

            for x, y in loader:
                n = torch.unique(y).numel()
                if n > 1:
                    loss = criterion(model(x), y)
                weights = torch.ones(len(y.unique()))
            """,
            note="no count fix where the count is read on the host (a condition, a size): the "
                 "sync would only move",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                classes = torch.unique(y.cuda()).cpu().tolist()
            """,
            note="one expression, one finding: the chain's later copy (`.cpu()`, PFL203) is named in "
                 "this finding's message, not reported again; `.tolist()` then reads host memory",
        ),
    ]
    valid = [
        Valid(
            """
            import numpy as np
            import pandas as pd

            df = pd.read_csv("labels.csv")
            for x, y in loader:
                a = np.unique(np.asarray([1, 2, 2]))
                b = df["label"].unique()
            """,
            note="numpy and pandas",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self, labels):
                    super().__init__()
                    self.classes = torch.unique(labels)
            """,
            note="once, at construction",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
            classes = torch.unique(y)
            """,
            note="once, after the loop",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                ids = torch.tensor([1, 2, 2])
                u = torch.unique(ids)
            """,
            note="a tensor built on the CPU never waits for the GPU",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
            labels = torch.randint(0, 150, (size * size,), device=device)
        """,
        bad="""
            y = torch.tanh(x)
            n = torch.unique(labels + (y[0, 0] > 2)).numel()
            result = torch.tensor(n)
        """,
        good="""
            y = torch.tanh(x)
            s = (labels + (y[0, 0] > 2)).flatten().sort().values
            result = (s[1:] != s[:-1]).sum() + (s.numel() > 0)
        """,
        description="count unique labels with `torch.unique(...).numel()` vs a sort on the device",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        match = _match(node, ctx)
        if match is None:
            return
        kind, source, label = match
        fix = None
        target = _count_target(node, ctx)
        if target is not None and source is not None and _count_fix_allowed(node, ctx, kind) \
                and not ctx.reaches_host(target):  # `if n > 1:`, `range(n)`: the sync would only move
            values = receiver_text(ctx, source) + ".flatten()"
            if kind == "unique":
                values += ".sort().values"
            fix = ctx.fix(
                Applicability.UNSAFE,
                "Count the unique values on the device (a 0-dim tensor instead of an int)",
                [ctx.replace(target, _COUNT.format(values=values))],
            )
        ctx.report(node, fix=fix, call=label)


def _match(node: ast.Call, ctx: RuleContext) -> tuple[str, ast.expr | None, str] | None:
    """(unique | unique_consecutive, the input expression, label) for a call that syncs."""
    name = ctx.call_name(node)
    if name in _FUNCTIONS:
        kind = _FUNCTIONS[name]
        source = node.args[0] if node.args and not isinstance(node.args[0], ast.Starred) else None
        if source is None:
            source = next((kw.value for kw in node.keywords if kw.arg == "input"), None)
        if source is not None and not device_input(ctx, source):
            return None
        return kind, source, f"torch.{kind}()"
    method = ctx.method_call(node, *_METHODS)
    if method is None:
        return None
    receiver, kind = method
    if name is None and not device_tensor(ctx, receiver):
        return None
    if name is not None and not device_input(ctx, receiver):
        return None
    return kind, receiver, f"Tensor.{kind}()"


def _count_fix_allowed(node: ast.Call, ctx: RuleContext, kind: str) -> bool:
    """Only `sorted` and default-valued flags besides the input: the count is of all values."""
    if opaque_arguments(node):
        return False
    qualified = ctx.call_name(node) is not None
    extra_positional = node.args[1:] if qualified else node.args
    if kind == "unique":
        if len(extra_positional) > 1 or (extra_positional and not isinstance(literal(extra_positional[0]), bool)):
            return False
    elif extra_positional:
        return False
    for kw in node.keywords:
        value = literal(kw.value)
        if kw.arg == "input":
            continue
        if kw.arg == "sorted" and kind == "unique" and isinstance(value, bool):
            continue
        if kw.arg in ("return_inverse", "return_counts") and value is False:
            continue
        if kw.arg == "dim" and value is None:
            continue
        return False
    return True


def _is_first_or_last(node: ast.expr | None) -> bool:
    return literal(node) in (0, -1) and not isinstance(literal(node), bool)


def _count_target(node: ast.Call, ctx: RuleContext) -> ast.expr | None:
    """The expression that only counts the unique values (`.numel()`, `len()`, `.shape[0]`)."""
    parent = ctx.parent(node)
    if isinstance(parent, ast.Call) and parent.args == [node] and not parent.keywords:
        if ctx.call_name(parent) in ("builtins.len", "torch.numel"):
            return parent
        return None
    if not isinstance(parent, ast.Attribute) or parent.value is not node:
        return None
    outer = ctx.parent(parent)
    if parent.attr in ("numel", "nelement"):
        if isinstance(outer, ast.Call) and outer.func is parent and not outer.args and not outer.keywords:
            return outer
        return None
    if parent.attr == "shape":
        if isinstance(outer, ast.Subscript) and isinstance(outer.ctx, ast.Load) and _is_first_or_last(outer.slice):
            return outer
        return None
    if parent.attr == "size" and isinstance(outer, ast.Call) and outer.func is parent:
        dims = list(outer.args) + [kw.value for kw in outer.keywords if kw.arg == "dim"]
        if len(dims) == 1 and len(outer.args) + len(outer.keywords) == 1 and _is_first_or_last(dims[0]):
            return outer
        if not outer.args and not outer.keywords:
            index = ctx.parent(outer)
            if isinstance(index, ast.Subscript) and index.value is outer and isinstance(index.ctx, ast.Load) \
                    and _is_first_or_last(index.slice):
                return index
    return None

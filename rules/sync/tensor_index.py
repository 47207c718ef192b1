from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.torch_api import INT_ARG_METHODS, int_arguments
from perflint.facts.values import Kind
from perflint.rule import Benchmark, Invalid, Rule, Valid

# Containers whose `[i]` converts a tensor index with `__index__` (or, for tensors,
# `item()`): lists and tuples, numpy arrays, nn.ModuleList / nn.Sequential, tensors. Dicts
# hash the key instead and never read it.
_INDEXED_BY_INT = frozenset({Kind.TENSOR, Kind.SEQ, Kind.NDARRAY, Kind.MODULE})


class TensorAsIndex(Rule):
    """## What it does
    Checks for an integer tensor used where Python or PyTorch needs an `int`, in code
    that runs every step: `range(n)`, `lst[i]` on lists and tuples, `x[i]` and `x[i] = v`
    on tensors (for example `x[logits.argmax()]`), slice bounds `x[:n]`, and sizes or
    counts such as `torch.zeros(n)`, `torch.arange(n)`, `x.view(n, -1)`, `x.reshape(n)`,
    `x.expand(n, d)`, `x.repeat(n, 1)`, `x.new_zeros(n)`, `x.narrow(0, 0, n)`, `x.topk(k)`.

    As an index, only tensors known to have no dimensions are reported (full reductions
    such as `lengths.max()`, `mask.sum()`, `logits.argmax()`); an index with dimensions
    selects on the device, and a 0-dim boolean index is a mask (`boolean-mask-indexing`,
    PFL214). Where only a one-element tensor fits (a size or count, a slice bound,
    `range()`), an integer tensor known to be on the accelerator is reported whatever its
    known rank (`k = num_pos[i]; x.topk(k)` with `num_pos` computed from batches moved to
    the GPU): it has to be read to be used, or the code raises.

    ## Why is this bad?
    Python asks the tensor for an `int` (`Tensor.__index__`), and PyTorch's indexing turns a
    0-dim integer index into `index.item()` followed by a select. Either way the value is
    copied to the host: a blocking copy that waits for every kernel queued before it. A
    common case is building a mask from `lengths.max()` every step.

    ## Example
    ```python
    class Masker(torch.nn.Module):
        def forward(self, x, lengths):
            n = lengths.max()
            steps = torch.arange(n, device=x.device)
            return x[:, :n] * (steps[None, :] < lengths[:, None]).unsqueeze(-1)
    ```

    ## Use instead
    Use a size the host already knows, or keep the computation on the device:
    ```python
    class Masker(torch.nn.Module):
        def forward(self, x, lengths):
            steps = torch.arange(x.shape[1], device=x.device)
            return x * (steps[None, :] < lengths[:, None]).unsqueeze(-1)
    ```
    To pick an element by a device index, gather instead of indexing with a Python int:
    `x.index_select(0, i.view(1)).squeeze(0)` (a copy, not a view) or
    `torch.gather`.

    ## References
    - `handleDimInMultiDimIndexing` in ATen/TensorIndexing.h: a 0-dim integral index becomes `tensor.item<int64_t>()`.
    - [pytorch/pytorch#105641](https://github.com/pytorch/pytorch/issues/105641): indexing with a 0-dim CUDA tensor syncs.
    """

    code = "PFL205"
    name = "tensor-as-index"
    message = "a tensor used as {what} is read to the host, waiting for the GPU every step"
    invalid = [
        Invalid(
            """
            import torch

            class Head(torch.nn.Module):
                def forward(self, x, logits, lengths):
                    best = x[logits.argmax()]
                    n = lengths.max()
                    prefix = x[:n]
                    mask = torch.zeros(n, dtype=torch.bool, device=x.device)
                    steps = torch.arange(n, device=x.device)
                    flat = x.view(n, -1)
                    grown = x.new_zeros((n, 4))
                    for i in range(n):
                        pass
                    return best, prefix, mask, steps, flat, grown
            """,
            count=7,
        ),
        Invalid(
            """
            import torch

            for images, labels in loader:
                out = model(images)
                k = labels.max()
                names = ["a", "b", "c"]
                first = names[k]
                out[out.argmax()] = 0.0
                tiled = out.repeat(k, 1)
                top = out.topk(k)
                cut = torch.narrow(out, 0, 0, k)
            """,
            count=5,
            note="lists, writes, function forms",
        ),
        Invalid(
            """
            import torch

            NAMES = ["person", "bicycle", "car"]

            def detect(model, dataset, device):
                for path, im in dataset:
                    pred = model(torch.from_numpy(im).to(device))
                    for det in pred:
                        counts = [0, 0, 0]
                        for cls in det[:, 5]:
                            counts[cls] += 1
                        for c in det[:, 5].unique():
                            print(NAMES[c])
            """,
            count=2,
            note="iterating a column of an accelerator tensor yields 0-dim tensors (YOLO-style)",
        ),
        Invalid(
            """
            import torch

            def train(model, loader, optimizer, device):
                for images, labels in loader:
                    scores = model(images.to(device))
                    num_pos = (labels.to(device) > 0).sum(1)
                    kept = []
                    for i in range(scores.shape[0]):
                        k = num_pos[i]
                        kept.append(scores[i].topk(k).values.sum() + scores[i, :k].mean())
                    torch.stack(kept).sum().backward()
                    optimizer.step()
            """,
            count=2,
            note="an element of a per-row count on the GPU, rank unknown, as `topk`'s k and a slice bound",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x, idx: torch.Tensor, mask: torch.BoolTensor):
                    n = x.size(0)
                    a = x[:n]
                    b = x.view(n, -1)
                    c = torch.zeros(x.shape[0], device=x.device)
                    d = x[idx]
                    e = x[mask]
                    f = x[x.sum() > 0]
                    table = {}
                    g = table[x.argmax()]
                    return a, b, c, d, e, f, g
            """,
            note="host sizes, index tensors with dimensions, masks, dict keys",
        ),
        Valid(
            """
            import numpy as np
            import torch

            for x, y in loader:
                a = np.arange(5)
                i = a.argmax()
                b = a[i]
                cpu_n = torch.tensor(3)
                c = x[:cpu_n]
            """,
            note="numpy values and tensors known to be on the CPU",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                out = model(x)
            n = out.argmax()
            last = out[n]
            """,
            note="once after the loop",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self, sizes):
                    super().__init__()
                    total = torch.tensor(sizes, device="cuda").sum()
                    self.table = torch.zeros(total)
            """,
            note="__init__ runs once",
        ),
        Valid(
            """
            import torch

            NAMES = ["person", "bicycle", "car"]

            def detect(model, dataset, device):
                for path, im in dataset:
                    pred = model(torch.from_numpy(im).to(device))
                    for det in pred:
                        det = det.cpu()
                        counts = [0, 0, 0]
                        for cls in det[:, 5]:
                            counts[cls] += 1
                        for c in det[:, 5].tolist():
                            print(NAMES[int(c)])
            """,
            note="the detections copied to the host once: their elements are read there",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            result = y[y[:, 0].argmax()]
        """,
        good="""
            y = torch.tanh(x)
            result = y.index_select(0, y[:, 0].argmax().view(1)).squeeze(0)
        """,
        description="`x[t.argmax()]` vs `index_select` with the index kept on the device",
    )

    # ----------------------------------------------------------------- helpers
    def _read(self, node: ast.expr, ctx: RuleContext, what: str, *, index: bool, single: bool = False) -> None:
        """`single`: a place only a one-element tensor fits (a size, a count, a slice bound,
        `range()`): whatever its known rank, a tensor there is read to the host (or the
        code raises). Elsewhere an index with dimensions selects on the device."""
        value = ctx.value(node)
        if value.kind is not Kind.TENSOR or value.on_cpu:
            return
        # Of unknown rank, only a tensor known to be on the accelerator: a `forward()`
        # input taken for a tensor may be a list of ints (`for n in sizes: range(n)`).
        if not value.zero_dim and not (single and value.device == "accel"):
            return
        # As an index, a bool tensor is a mask (PFL214) and a float one raises.
        if (index or not value.zero_dim) and value.dtype not in ("int", None):
            return
        ctx.report(node, what=what)

    def _slice(self, node: ast.Slice, ctx: RuleContext) -> None:
        for bound in (node.lower, node.upper, node.step):
            if bound is not None:
                self._read(bound, ctx, "a slice bound", index=True, single=True)

    # ----------------------------------------------------------------- visitors
    def visit_Subscript(self, node: ast.Subscript, ctx: RuleContext) -> None:
        index = node.slice
        if isinstance(index, ast.Slice):
            self._slice(index, ctx)  # any sliceable object converts its bounds
            return
        base = ctx.value(node.value)
        if base.kind not in _INDEXED_BY_INT:
            return
        parts = index.elts if isinstance(index, ast.Tuple) and base.kind in (Kind.TENSOR, Kind.NDARRAY) else [index]
        for part in parts:
            if isinstance(part, ast.Slice):
                self._slice(part, ctx)
            else:
                self._read(part, ctx, "an index", index=True)

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name == "builtins.range":
            for arg in node.args:
                self._read(arg, ctx, "a `range()` bound", index=True, single=True)
            return
        if name is not None:
            for arg in int_arguments(name, None, node):
                self._read(arg, ctx, f"a size or count in `{name}()`", index=False, single=True)
            if not name.startswith("torch.Tensor."):
                return
        call = ctx.method_call(node, *INT_ARG_METHODS)
        if call is None:
            return
        receiver, method = call
        if not ctx.maybe_tensor(receiver):
            return
        unbound = receiver is not getattr(node.func, "value", None)
        own = ast.Call(func=node.func, args=node.args[1:], keywords=node.keywords) if unbound else node
        for arg in int_arguments(None, method, own):
            self._read(arg, ctx, f"a size or count in `.{method}()`", index=False, single=True)

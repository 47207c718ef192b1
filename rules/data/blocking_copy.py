from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rewrite import RewriteError, cst, set_keyword
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._loaders import argument, host_copy_may_be_mutated, loader_batch_move, pins_memory
from ._moves import has_star, is_true, keyword


class BlockingHostToDeviceCopy(Rule):
    """## What it does
    Checks for `.to(device)` and `.cuda()` of a batch from a `DataLoader(..., pin_memory=True)`
    without `non_blocking=True`, in code that runs every step.

    ## Why is this bad?
    A host-to-device copy with `non_blocking=False` (the default) makes the CPU wait until the
    copy has finished, which means waiting for all the GPU work queued before it. The loader
    already puts batches in pinned memory, which is exactly what lets the copy run
    asynchronously: with `non_blocking=True` the CPU goes on queueing the step while the data
    moves.

    ## Example
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
    ```

    ## Use instead
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = criterion(model(x), y)
    ```

    ## Fix safety
    The fix adds `non_blocking=True`. It is **safe** when the loader uses the default
    `collate_fn` and the host tensor is not written after the copy is queued: the copy is
    ordered on the current stream, so every kernel that later reads the GPU tensor sees the
    copied data, and a pinned loader batch is a fresh buffer for every step, so nothing else
    reuses it while the copy is in flight (PyTorch's pinned-memory allocator also keeps a
    freed block until the copies that read it have finished). Values are identical.

    It is **unsafe** when the loader has a custom `collate_fn` (the batch may be an object
    whose `.to()` does not take `non_blocking`), or when the moved tensor, or a variable of
    the loop around the move, is written in place after the move in the same function
    (`x.mul_(2)`, `x[0] = 1`, `x += 1`, `out=x`): that write could race with the copy.

    ## References
    - [A guide on good usage of `non_blocking` and `pin_memory()`](https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html): "If non_blocking=False (default), a cudaStreamSynchronize will be called after each and every cudaMemcpyAsync"
    - [CUDA semantics: use pinned memory buffers](https://pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers)
    """

    code = "PFL105"
    name = "blocking-host-to-device-copy"
    message = "this copy of a pinned batch to the device blocks the CPU; pass `non_blocking=True`"
    family = "data"
    fix_availability = FixAvailability.SOMETIMES
    triggers = (b"pin_memory",)
    invalid = [
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
            for images, labels in loader:
                images = images.to(device)
                labels = labels.cuda()
                loss = criterion(model(images), labels)
            """,
            count=2,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
            for images, labels in loader:
                images = images.to(device, non_blocking=True)
                labels = labels.cuda(non_blocking=True)
                loss = criterion(model(images), labels)
            """,
        ),
        Invalid(
            """
            import torch

            class Trainer:
                def __init__(self, ds):
                    self.loader = torch.utils.data.DataLoader(ds, batch_size=8, pin_memory=True)

                def fit(self):
                    for batch in self.loader:
                        batch = {k: v.to(self.device, non_blocking=False) for k, v in batch.items()}
                        self.model(**batch).loss.backward()
            """,
            fixed="""
            import torch

            class Trainer:
                def __init__(self, ds):
                    self.loader = torch.utils.data.DataLoader(ds, batch_size=8, pin_memory=True)

                def fit(self):
                    for batch in self.loader:
                        batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
                        self.model(**batch).loss.backward()
            """,
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32, pin_memory=True, collate_fn=collate)
            plain = DataLoader(dataset, batch_size=32, pin_memory=True)
            for batch in loader:
                batch = batch.to(device)
            for x, y in plain:
                gpu = x.to(device)
                x.mul_(2)
            """,
            count=2,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32, pin_memory=True, collate_fn=collate)
            plain = DataLoader(dataset, batch_size=32, pin_memory=True)
            for batch in loader:
                batch = batch.to(device)
            for x, y in plain:
                gpu = x.to(device)
                x.mul_(2)
            """,
            note="a custom collate_fn, or the host tensor written after the copy: unsafe only",
        ),
    ]
    valid = [
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32, pin_memory=True)
            for x, y in loader:
                x = x.to(device, non_blocking=True)
                y = y.cuda(non_blocking=True)
            """,
        ),
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32)
            for x, y in loader:
                x = x.to(device)
            """,
            note="pageable batches: PFL104's business, non_blocking gains little there",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            w = torch.randn(size, size, device=device)
            dataset = torch.utils.data.TensorDataset(torch.randn(4 * 64, size))
            # (on a machine without an accelerator DataLoader warns and does not pin)
            loader = torch.utils.data.DataLoader(dataset, batch_size=64, pin_memory=True)
        """,
        bad="""
            total = torch.zeros((), device=device)
            for (batch,) in loader:
                x = batch.to(device)
                total = total + torch.tanh(x @ w).sum()
            result = total
        """,
        good="""
            total = torch.zeros((), device=device)
            for (batch,) in loader:
                x = batch.to(device, non_blocking=True)
                total = total + torch.tanh(x @ w).sum()
            result = total
        """,
        description="one pass over a pinned-memory DataLoader: blocking vs non-blocking batch copies",
        compare="close",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        found = loader_batch_move(node, ctx, foreign=True)  # a pinned loader of another file too
        if found is None:
            return
        move, loader = found
        if not pins_memory(loader) or is_true(move.non_blocking):
            return
        fix = None
        positional = move.non_blocking is not None and keyword(node, "non_blocking") is None
        if not has_star(node) and not positional:
            safe = argument(loader, "collate_fn") is None and not host_copy_may_be_mutated(move, ctx)
            try:
                edit = ctx.rewrite(node, lambda call: set_keyword(call, "non_blocking", "True"))  # type: ignore[arg-type]
            except (RewriteError, cst.ParserSyntaxError):
                edit = None
            if edit is not None:
                fix = ctx.fix(Applicability.SAFE if safe else Applicability.UNSAFE,
                              "Pass `non_blocking=True`", [edit])
        ctx.report(node, fix=fix)

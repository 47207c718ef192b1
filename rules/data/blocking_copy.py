from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.syntax import dotted
from perflint.facts.values import Kind
from perflint.rewrite import RewriteError, cst, set_keyword
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._loaders import (UNKNOWN, accelerate_prepared, argument_of, choices, host_copy_may_be_mutated, loader_batch_move,
                       pins_memory)
from ._moves import device_move, has_star, is_false, is_true, keyword

# Casts that make a new host tensor from a pinned one (pageable: its copy cannot be asynchronous).
_HOST_CASTS = frozenset({"long", "float", "int", "half", "double", "bfloat16", "short", "byte", "bool"})


class BlockingHostToDeviceCopy(Rule):
    """## What it does
    Checks for `.to(device)` and `.cuda()` of a batch from a `DataLoader(..., pin_memory=True)`
    without `non_blocking=True`, in code that runs every step, and for such a loader handed to
    Hugging Face accelerate's `accelerator.prepare(...)` with an `Accelerator(...)` of the same
    file that is not given `dataloader_config=DataLoaderConfiguration(non_blocking=True)`:
    accelerate's loader then copies each batch with `non_blocking=False` (its default). A loader pinned through a
    `**kwargs` dict of the same function counts when some path pins it and every path's
    value is known (`if use_cuda: kwargs.update({"pin_memory": True})`). A pinned batch cast
    on the host before its copy (`labels.long().cuda()`) is reported too: the cast's result is
    in pageable memory, so that copy blocks whatever `non_blocking` says; move the batch
    first and cast it on the device (`labels.cuda(non_blocking=True).long()`). No fix is
    offered for that form.

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
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            def main(args, dataset1, model, optimizer):
                use_cuda = not args.no_cuda and torch.cuda.is_available()
                device = torch.device("cuda" if use_cuda else "cpu")
                train_kwargs = {"batch_size": args.batch_size}
                if use_cuda:
                    cuda_kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True}
                    train_kwargs.update(cuda_kwargs)
                train_loader = DataLoader(dataset1, **train_kwargs)
                for data, target in train_loader:
                    data, target = data.to(device), target.to(device)
                    optimizer.zero_grad()
                    loss = model(data).sum()
                    loss.backward()
                    optimizer.step()
            """,
            count=2,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def main(args, dataset1, model, optimizer):
                use_cuda = not args.no_cuda and torch.cuda.is_available()
                device = torch.device("cuda" if use_cuda else "cpu")
                train_kwargs = {"batch_size": args.batch_size}
                if use_cuda:
                    cuda_kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True}
                    train_kwargs.update(cuda_kwargs)
                train_loader = DataLoader(dataset1, **train_kwargs)
                for data, target in train_loader:
                    data, target = data.to(device, non_blocking=True), target.to(device, non_blocking=True)
                    optimizer.zero_grad()
                    loss = model(data).sum()
                    loss.backward()
                    optimizer.step()
            """,
            note="settings in a dict (pinned when CUDA is used), passed as `**train_kwargs`",
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            def create_dataloader(dataset, batch_size, workers=8):
                kwargs = dict(batch_size=batch_size, shuffle=True)
                kwargs["pin_memory"] = True
                kwargs["num_workers"] = workers
                return DataLoader(dataset, **kwargs)

            class Trainer:
                def setup(self, dataset):
                    self.device = torch.accelerator.current_accelerator()
                    self.train_loader = create_dataloader(dataset, 64)

                def train_epoch(self, model, optimizer):
                    for images, labels in self.train_loader:
                        images = images.to(self.device)
                        labels = labels.to(self.device)
                        loss = torch.nn.functional.cross_entropy(model(images), labels)
                        loss.backward()
                        optimizer.step()
            """,
            count=2,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def create_dataloader(dataset, batch_size, workers=8):
                kwargs = dict(batch_size=batch_size, shuffle=True)
                kwargs["pin_memory"] = True
                kwargs["num_workers"] = workers
                return DataLoader(dataset, **kwargs)

            class Trainer:
                def setup(self, dataset):
                    self.device = torch.accelerator.current_accelerator()
                    self.train_loader = create_dataloader(dataset, 64)

                def train_epoch(self, model, optimizer):
                    for images, labels in self.train_loader:
                        images = images.to(self.device, non_blocking=True)
                        labels = labels.to(self.device, non_blocking=True)
                        loss = torch.nn.functional.cross_entropy(model(images), labels)
                        loss.backward()
                        optimizer.step()
            """,
            note="a factory returning the loader, kept on `self` in `setup()`, the device from "
                 "`torch.accelerator.current_accelerator()`",
        ),
        Invalid(
            """
            import accelerate
            from torch.utils import data

            accelerator = accelerate.Accelerator(gradient_accumulation_steps=1, mixed_precision="bf16")
            train_dl = data.DataLoader(train_set, batch_size=32, shuffle=True, num_workers=8, pin_memory=True)
            inner_model, opt, train_dl = accelerator.prepare(inner_model, opt, train_dl)
            for batch in train_dl:
                loss = inner_model(batch).mean()
                accelerator.backward(loss)
                opt.step()
            """,
            note="accelerate copies a pinned loader's batches with `non_blocking=False` unless configured (k-diffusion)",
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=8, num_workers=4, pin_memory=True)
            for images, labels in loader:
                images = images.cuda(non_blocking=True)
                labels = labels.long().cuda()
                loss = criterion(model(images), labels)
            """,
            count=1,
            note="cast on the host, then copied: the cast's result is pageable",
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
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader

            def main(args, dataset1, model, optimizer, cuda_kwargs):
                device = torch.device("cuda")
                train_kwargs = {"batch_size": args.batch_size}
                if args.cuda:
                    train_kwargs.update(cuda_kwargs)
                train_loader = DataLoader(dataset1, **train_kwargs)
                test_kwargs = {"batch_size": 64, "pin_memory": True}
                configure(test_kwargs)
                test_loader = DataLoader(dataset1, **test_kwargs)
                for data, target in train_loader:
                    data, target = data.to(device), target.to(device)
                    model(data).sum().backward()
                for data, target in test_loader:
                    data = data.to(device)
                    model(data).sum().backward()
            """,
            note="a dict updated from a mapping of unknown content, or handed to a function: unknown",
        ),
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader

            def create_dataloader(dataset, batch_size, pin):
                kwargs = dict(batch_size=batch_size, shuffle=True, pin_memory=True)
                kwargs["pin_memory"] = pin
                return DataLoader(dataset, **kwargs)

            class Trainer:
                def setup(self, dataset):
                    self.device = torch.accelerator.current_accelerator()
                    self.train_loader = create_dataloader(dataset, 64, False)

                def train_epoch(self, model, optimizer):
                    for images, labels in self.train_loader:
                        images = images.to(self.device)
                        model(images).sum().backward()
                        optimizer.step()
            """,
            note="the factory's pin_memory is a variable: not known to be pinned",
        ),
        Valid(
            """
            from accelerate import Accelerator, DataLoaderConfiguration
            from torch.utils.data import DataLoader

            accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(non_blocking=True))
            loader = DataLoader(dataset, batch_size=32, pin_memory=True)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                accelerator.backward(model(**batch).loss)
            """,
            note="accelerate told to copy the pinned batches asynchronously",
        ),
        Valid(
            """
            from torch.utils.data import DataLoader

            pinned = DataLoader(dataset, batch_size=8, num_workers=4, pin_memory=True)
            for images, labels in pinned:
                images = images.cuda(non_blocking=True)
                labels = labels.cuda(non_blocking=True).long()
                loss = criterion(model(images), labels)
            """,
            note="moved first, cast on the device",
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

    cast_message = ("`{cast}` copies this pinned batch to pageable memory on the host, so the copy to the device "
                    "blocks the CPU every step; move it first (`non_blocking=True`), then cast it on the device")
    accelerate_message = ("accelerate copies the batches of this pinned loader with `non_blocking=False`, blocking the "
                          "CPU every step; pass `dataloader_config=DataLoaderConfiguration(non_blocking=True)` to "
                          "`Accelerator`")

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        if not ctx.hot:  # `accelerator.prepare(loader)`, visited as the call that feeds the loader
            self._accelerate_prepare(node, ctx)
            return
        found = loader_batch_move(node, ctx, foreign=True)  # a pinned loader of another file too
        if found is None:
            self._cast_then_moved(node, ctx)
            return
        move, loader = found
        if not pins_memory(loader) or is_true(move.non_blocking):
            return
        fix = None
        positional = move.non_blocking is not None and keyword(node, "non_blocking") is None
        if not has_star(node) and not positional:
            safe = choices(loader, "collate_fn") == frozenset({None}) and not host_copy_may_be_mutated(move, ctx)
            try:
                edit = ctx.rewrite(node, lambda call: set_keyword(call, "non_blocking", "True"))  # type: ignore[arg-type]
            except (RewriteError, cst.ParserSyntaxError):
                edit = None
            if edit is not None:
                fix = ctx.fix(Applicability.SAFE if safe else Applicability.UNSAFE,
                              "Pass `non_blocking=True`", [edit])
        ctx.report(node, fix=fix)

    def _cast_then_moved(self, node: ast.Call, ctx: RuleContext) -> None:
        """`labels.long().cuda()` of a pinned batch: the cast makes a pageable copy on the
        host, which no `non_blocking` makes asynchronous; moving first and casting on the
        device keeps the pinned source (`labels.cuda(non_blocking=True).long()`)."""
        move = device_move(node, ctx)
        cast = move.receiver if move is not None and move.method in ("cuda", "to") else None
        if not (isinstance(cast, ast.Call) and isinstance(cast.func, ast.Attribute)
                and cast.func.attr in _HOST_CASTS and not cast.args and not cast.keywords):
            return
        batch = ctx.value(cast.func.value)
        if batch.kind is Kind.BATCH and isinstance(batch.origin, ast.Call) and pins_memory(batch.origin):
            ctx.report(node, self.cast_message, cast=f".{cast.func.attr}()")

    def _accelerate_prepare(self, node: ast.Call, ctx: RuleContext) -> None:
        """`accelerator.prepare(..., loader)` of a pinned loader, with an `Accelerator(...)` of
        this file that does not ask for non-blocking copies."""
        prepared = accelerate_prepared(node, ctx)
        if prepared is None or prepared.accelerator is None or not any(map(pins_memory, prepared.loaders)):
            return
        config = argument_of(prepared.accelerator, "dataloader_config")
        if config is UNKNOWN:
            return
        if config is not None:
            if not (isinstance(config, ast.Call) and dotted(config.func).endswith("DataLoaderConfiguration")):
                return  # a config made elsewhere: not read
            non_blocking = argument_of(config, "non_blocking")
            if non_blocking is UNKNOWN or (non_blocking is not None and not is_false(non_blocking)):
                return
        ctx.report(node, self.accelerate_message)

from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.values import Kind
from perflint.rewrite import RewriteError, cst, set_keyword
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._loaders import POSITIONS, UNKNOWN, argument, choices, fed_loaders


class DataLoaderWithoutPinMemory(Rule):
    """## What it does
    Checks for a `torch.utils.data.DataLoader(...)` without `pin_memory=True` whose batches
    are copied to the GPU every step (`.to(device)` / `.cuda()` in a loop over the loader, or
    in code that loop calls), or that is handed to Hugging Face accelerate's
    `accelerator.prepare(...)`, whose loader copies every batch to the device, or that a
    LightningModule's or LightningDataModule's `train_dataloader()` (`val_`, `test_`,
    `predict_`) returns: Lightning copies each of its batches to the module's device.

    The finding is on the `DataLoader(...)` call. Not reported: a loader with a collate
    function in a file that imports DGL (its batches are DGL graphs, which the loader's
    pinning leaves in pageable memory). A loader whose `pin_memory` is a variable
    (`pin_memory=torch.cuda.is_available()`), or that gets its arguments from a `**kwargs`
    that cannot be read, is not reported. A `**kwargs` dict built in the same function
    (`kwargs = {...}`, `kwargs.update({...})`, `kwargs["pin_memory"] = True`, under an `if`
    too) is read on every path: the loader is reported when no path pins (without a fix:
    the dict is the place to add it).

    ## Why is this bad?
    A batch in ordinary (pageable) host memory cannot be copied to the GPU directly: the
    driver first stages it through a pinned buffer, and the copy blocks the host. With
    `pin_memory=True` the loader puts each batch in page-locked memory, which the GPU reads
    directly, and `.to(device, non_blocking=True)` can then overlap the copy with compute.

    ## Example
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=64, num_workers=4)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
    ```

    ## Use instead
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    ```

    ## Fix safety
    The fix adds `pin_memory=True` (or turns `pin_memory=False` into it). It is **unsafe**:
    the values the loop sees are the same, but page-locked memory is a limited host resource
    (very large batches can fail to pin, or starve the rest of the system), a custom batch
    type's own `pin_memory()` method now gets called, and on a machine without an
    accelerator the loader warns that pinning is unavailable.

    ## References
    - [`torch.utils.data`: memory pinning](https://pytorch.org/docs/stable/data.html#memory-pinning)
    - [A guide on good usage of `non_blocking` and `pin_memory()`](https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html)
    """

    code = "PFL104"
    name = "dataloader-without-pin-memory"
    message = "this DataLoader feeds batches to the GPU from pageable memory; pass `pin_memory=True`"
    family = "data"
    fix_availability = FixAvailability.SOMETIMES
    fix_reveals = ("PFL105",)  # the loop's copies from pinned memory can then be non-blocking
    triggers = (b"DataLoader",)
    invalid = [
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32, num_workers=4)
            for images, labels in loader:
                images = images.to(device)
            """,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
            for images, labels in loader:
                images = images.to(device)
            """,
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import torch

            def train(model, dataset):
                loader = torch.utils.data.DataLoader(
                    dataset,
                    batch_size=32,
                    pin_memory=False,
                )
                for step, (x, y) in enumerate(loader):
                    loss = model(x.cuda(), y.cuda())
            """,
            fixed="""
            import torch

            def train(model, dataset):
                loader = torch.utils.data.DataLoader(
                    dataset,
                    batch_size=32,
                    pin_memory=True,
                )
                for step, (x, y) in enumerate(loader):
                    loss = model(x.cuda(), y.cuda())
            """,
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, 32, True, None, None, 2, None, False)
            for x in loader:
                x = x.to(device)
            """,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, 32, True, None, None, 2, None, False)
            for x in loader:
                x = x.to(device)
            """,
            unsafe_fixes=True,
            note="pin_memory given positionally: reported, not fixed",
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            class Trainer:
                def __init__(self, dataset, model):
                    self.model = model
                    self.device = torch.accelerator.current_accelerator()
                    loader_kwargs = {"batch_size": 64, "num_workers": 4}
                    loader_kwargs["drop_last"] = True
                    self.train_loader = DataLoader(dataset, shuffle=True, **loader_kwargs)

                def train(self):
                    for x, y in self.train_loader:
                        x, y = x.to(self.device), y.to(self.device)
                        self.model(x, y).backward()
            """,
            note="settings in a dict without `pin_memory`, the loader on `self`, the device "
                 "from `torch.accelerator`: reported, not fixed (the dict is the place to fix)",
        ),
        Invalid(
            """
            from accelerate import Accelerator
            from torch.utils.data import DataLoader

            accelerator = Accelerator(mixed_precision="bf16")
            train_dataloader = DataLoader(train_ds, batch_size=8)
            model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
            for batch in train_dataloader:
                accelerator.backward(model(**batch).loss)
                optimizer.step()
            """,
            fixed="""
            from accelerate import Accelerator
            from torch.utils.data import DataLoader

            accelerator = Accelerator(mixed_precision="bf16")
            train_dataloader = DataLoader(train_ds, batch_size=8, pin_memory=True)
            model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
            for batch in train_dataloader:
                accelerator.backward(model(**batch).loss)
                optimizer.step()
            """,
            unsafe_fixes=True,
            note="a loader handed to `accelerator.prepare()`, which copies every batch to the device",
        ),
        Invalid(
            """
            import pytorch_lightning as pl
            from torch.utils.data import DataLoader

            class DataModule(pl.LightningDataModule):
                def train_dataloader(self):
                    return DataLoader(self.train_set, batch_size=32, num_workers=8)
            """,
            fixed="""
            import pytorch_lightning as pl
            from torch.utils.data import DataLoader

            class DataModule(pl.LightningDataModule):
                def train_dataloader(self):
                    return DataLoader(self.train_set, batch_size=32, num_workers=8, pin_memory=True)
            """,
            unsafe_fixes=True,
            note="a loader a LightningDataModule returns: Lightning copies every batch to the module's device",
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            def collate(samples):
                xs, ys = zip(*samples)
                return torch.stack(xs), torch.tensor(ys)

            loader = DataLoader(ds, 8, num_workers=4, collate_fn=collate)
            for x, y in loader:
                loss = model(x.to("cuda"), y.to("cuda"))
            """,
            count=1,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def collate(samples):
                xs, ys = zip(*samples)
                return torch.stack(xs), torch.tensor(ys)

            loader = DataLoader(ds, 8, num_workers=4, collate_fn=collate, pin_memory=True)
            for x, y in loader:
                loss = model(x.to("cuda"), y.to("cuda"))
            """,
            unsafe_fixes=True,
            note="a collate function of tensors: pinned like any batch",
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(ds, batch_size=12, shuffle=True, num_workers=1)
            for data in loader:
                inputs = data["image"].type(torch.FloatTensor)
                loss = model(inputs.cuda()).sum()
            """,
            count=1,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(ds, batch_size=12, shuffle=True, num_workers=1, pin_memory=True)
            for data in loader:
                inputs = data["image"].type(torch.FloatTensor)
                loss = model(inputs.cuda()).sum()
            """,
            unsafe_fixes=True,
            note="`.type(torch.FloatTensor)`, an old `.float()`, keeps the batch (U-2-Net's training loop)",
        ),
    ]
    valid = [
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32, pin_memory=True)
            maybe = DataLoader(dataset, batch_size=32, pin_memory=torch.cuda.is_available())
            for x, y in loader:
                x = x.to(device)
            for x, y in maybe:
                x = x.to(device)
            """,
        ),
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32)
            for x, y in loader:
                x = x.to(torch.float16)
                y = y.to("cpu")
            """,
            note="dtype casts and CPU targets are not device copies",
        ),
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader

            class Trainer:
                def __init__(self, dataset, model, use_cuda):
                    self.model = model
                    self.device = torch.accelerator.current_accelerator()
                    loader_kwargs = {"batch_size": 64, "num_workers": 4}
                    if use_cuda:
                        loader_kwargs["pin_memory"] = True
                    self.train_loader = DataLoader(dataset, shuffle=True, **loader_kwargs)

                def train(self):
                    for x, y in self.train_loader:
                        x = x.to(self.device, non_blocking=True)
                        self.model(x, y).backward()
            """,
            note="pinned on the accelerator path",
        ),
        Valid(
            """
            from accelerate import Accelerator
            from torch.utils.data import DataLoader

            accelerator = Accelerator(cpu=True)
            loader = DataLoader(dataset, batch_size=32)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                accelerator.backward(model(**batch).loss)
            """,
            note="an Accelerator on the CPU (or with `device_placement=False`) moves nothing to a GPU",
        ),
        Valid(
            """
            import dgl
            from torch.utils.data import DataLoader

            def collate(samples):
                graphs, labels = map(list, zip(*samples))
                return dgl.batch(graphs), torch.tensor(labels)

            loader = DataLoader(ds, 8, num_workers=4, collate_fn=collate)
            for graphs, labels in loader:
                loss = model(graphs.to("cuda"), labels.to("cuda"))
            """,
            note="DGL graphs: the loader's pinning skips them (a graph has no `pin_memory()`)",
        ),
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader, Dataset

            class TextSampler(Dataset):
                def __init__(self, data, seq_len):
                    self.data, self.seq_len = data, seq_len

                def __getitem__(self, index):
                    start = torch.randint(0, self.data.size(0) - self.seq_len, (1,))
                    return self.data[start: start + self.seq_len].long().cuda()

                def __len__(self):
                    return self.data.size(0) // self.seq_len

            train_set = TextSampler(data, 1024)
            for batch in DataLoader(train_set, batch_size=4):
                loss = model(batch.cuda())
            """,
            note="a dataset that returns device tensors: its batches are on the GPU already",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            dataset = torch.utils.data.TensorDataset(torch.randn(8 * 64, 3, 32, 32))
        """,
        bad="""
            loader = torch.utils.data.DataLoader(dataset, batch_size=64)
            result = sum(b.to(device).sum() for (b,) in loader)
        """,
        good="""
            # (on a machine without an accelerator DataLoader warns and does not pin)
            loader = torch.utils.data.DataLoader(dataset, batch_size=64, pin_memory=True)
            result = sum(b.to(device, non_blocking=True).sum() for (b,) in loader)
        """,
        description="one epoch copying batches from pageable vs pinned memory",
        compare="close",
        claim="time",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        for loader in fed_loaders(node, ctx):
            self._check(loader, ctx)

    def _check(self, loader: ast.Call, ctx: RuleContext) -> None:
        found = choices(loader, "pin_memory")
        if found is UNKNOWN or any(pin is not None and bool(pin) for pin in found):
            return  # pinned on some path, or unknown (a truthy literal too: `pin_memory=1`)
        if _collates_dgl_graphs(loader, ctx):
            return  # pinning skips a DGL graph (it has no `pin_memory()`): the fix would do little
        given = argument(loader, "pin_memory")
        fix = None
        if given is UNKNOWN:
            pass  # set in a `**kwargs` dict: fixed there, by hand
        elif given is None or (isinstance(given, ast.Constant) and len(loader.args) <= POSITIONS["pin_memory"]):
            try:
                edit = ctx.rewrite(loader, lambda call: set_keyword(call, "pin_memory", "True"))  # type: ignore[arg-type]
            except (RewriteError, cst.ParserSyntaxError):
                edit = None
            if edit is not None:
                fix = ctx.fix(Applicability.UNSAFE, "Pass `pin_memory=True`", [edit])
        ctx.report(loader, fix=fix)


def _collates_dgl_graphs(loader: ast.Call, ctx: RuleContext) -> bool:
    """A loader with a collate function in a file that imports DGL (benchmarking-gnns'
    `collate_fn=dataset.collate`, which returns `dgl.batch(graphs)`): its batches are graphs,
    which `pin_memory=True` leaves in pageable memory."""
    collate = argument(loader, "collate_fn")
    if collate is None or collate is UNKNOWN or (isinstance(collate, ast.Constant) and collate.value is None):
        return False
    return any(v.kind is Kind.REF and (v.ref == "dgl" or (v.ref or "").startswith("dgl."))
               for v in ctx.analysis.module_env.values())

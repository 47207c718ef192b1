from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid

from ._loaders import UNKNOWN, choices, fed_loaders, in_memory_dataset


class DataLoaderWithoutWorkers(Rule):
    """## What it does
    Checks for a `torch.utils.data.DataLoader(...)` without `num_workers > 0` whose batches
    are moved to the GPU every step (`.to(device)` / `.cuda()` in a loop over the loader, or
    in code that loop calls, by Hugging Face accelerate after `accelerator.prepare(loader)`, or
    by Lightning for the loaders a LightningModule's or LightningDataModule's
    `train_dataloader()`, `val_dataloader()`, ... returns).

    The finding is on the `DataLoader(...)` call. Settings given as `**kwargs` from a dict
    built in the same function (`kwargs = {...}`, then `kwargs.update({...})` or
    `kwargs["num_workers"] = 4`, possibly under an `if`) are read on every path: the loader
    is reported when no path sets workers. A loader whose `num_workers` is a variable on some
    path, or whose `**kwargs` cannot be read (a parameter, a dict handed to another
    function), is not reported: its value cannot be known. Nor is a loader over a
    `TensorDataset` (or `StackDataset`), directly, through a name or from a local function
    that returns one: its items are rows of tensors already in memory, so workers would have
    nothing to load and would only add the cost of sending each batch back.

    ## Why is this bad?
    With `num_workers=0` (the default) the main process loads, decodes, augments and
    collates every batch itself, between training steps. The GPU sits idle while it does.
    Worker processes prepare the next batches while the current step runs.

    ## Example
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
    ```

    ## Use instead
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4,
                        persistent_workers=True)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
    ```

    ## Fix safety
    There is no automatic fix: the right number of workers depends on the machine, the
    dataset must be picklable, and each worker gets its own random state (augmentations
    seeded with NumPy or Python `random` need `worker_init_fn`).

    ## References
    - [`torch.utils.data` single- and multi-process data loading](https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading)
    - [Performance tuning guide: enable asynchronous data loading](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#enable-asynchronous-data-loading-and-augmentation)
    """

    code = "PFL103"
    name = "dataloader-without-workers"
    message = "this DataLoader feeds a GPU loop but loads every batch in the main process (`num_workers` is 0)"
    family = "data"
    triggers = (b"DataLoader",)
    invalid = [
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32, shuffle=True)
            for images, labels in loader:
                images = images.to(device)
                loss = criterion(model(images), labels.to(device))
            """,
        ),
        Invalid(
            """
            import torch
            from tqdm import tqdm

            class Trainer:
                def __init__(self, dataset):
                    self.loader = torch.utils.data.DataLoader(dataset, 16, True, None, None, 0)

                def fit(self):
                    for step, batch in enumerate(tqdm(self.loader)):
                        batch = {k: v.cuda() for k, v in batch.items()}
                        self.model(**batch).loss.backward()
            """,
            note="a loader kept on self, iterated through enumerate/tqdm, num_workers=0 given positionally",
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            def make_loader(ds):
                return DataLoader(ds, batch_size=8, num_workers=0)

            def to_device(batch):
                return [t.to(device, non_blocking=True) for t in batch]

            train = make_loader(train_set)
            for batch in train:
                inputs, targets = to_device(batch)
                optimizer.zero_grad()
            """,
            note="made in a helper, moved in another helper",
        ),
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            def main(args, dataset, model, optimizer):
                device = torch.accelerator.current_accelerator()
                kwargs = {"batch_size": args.batch_size, "shuffle": True}
                if torch.cuda.is_available():
                    kwargs.update({"pin_memory": True})
                loader = DataLoader(dataset, **kwargs)
                for images, labels in loader:
                    images = images.to(device, non_blocking=True)
                    model(images).sum().backward()
                    optimizer.step()
            """,
            note="settings in a dict passed as `**kwargs`: `num_workers` is not set on any path",
        ),
        Invalid(
            """
            import lightning as L
            import torch.nn.functional as F
            from torch.utils.data import DataLoader

            class Classifier(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    return F.cross_entropy(self(x), y)

                def train_dataloader(self):
                    return DataLoader(self.train_set, batch_size=64, shuffle=True, pin_memory=True)
            """,
            note="a loader a LightningModule returns: Lightning iterates it and moves every batch to the device",
        ),
    ]
    valid = [
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32, num_workers=4)
            for x, y in loader:
                x = x.to(device)
            """,
            note="workers",
        ),
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32, num_workers=args.workers)
            other = DataLoader(dataset, **loader_kwargs)
            for x, y in loader:
                x = x.to(device)
            for x, y in other:
                x = x.to(device)
            """,
            note="a variable or **kwargs: cannot tell",
        ),
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(dataset, batch_size=32)
            for x, y in loader:
                total += x.sum()
            """,
            note="a CPU-only loop",
        ),
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader

            def main(args, dataset, model, optimizer):
                device = torch.accelerator.current_accelerator()
                kwargs = {"batch_size": args.batch_size, "num_workers": 0}
                if torch.cuda.is_available():
                    kwargs.update({"pin_memory": True, "num_workers": 4})
                loader = DataLoader(dataset, **kwargs)
                for images, labels in loader:
                    images = images.to(device, non_blocking=True)
                    model(images).sum().backward()
                    optimizer.step()
            """,
            note="workers on the accelerator path",
        ),
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader, TensorDataset

            def make_dataset(n) -> TensorDataset:
                return TensorDataset(torch.randn(n, 16), torch.randint(0, 2, (n,)))

            train_set = make_dataset(1024)
            features = TensorDataset(embeddings, labels)
            for loader in (DataLoader(train_set, batch_size=64), DataLoader(features, batch_size=64)):
                for x, y in loader:
                    loss = criterion(model(x.cuda()), y.cuda())
            """,
            note="rows of tensors already in memory: nothing for workers to load",
        ),
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader, Dataset

            device = torch.device("cuda")

            class Pairs(Dataset):
                def __getitem__(self, index):
                    x, y = self.inputs[index], self.targets[index]
                    return x.to(device), y.to(device)

            for x, y in DataLoader(Pairs(), batch_size=32, shuffle=True):
                loss = criterion(model(x.to(device)), y.to(device))
            """,
            note="a dataset that returns device tensors (CUDA fails in a forked worker)",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            class Decoded(torch.utils.data.Dataset):
                def __len__(self):
                    return 64

                def __getitem__(self, i):
                    g = torch.Generator().manual_seed(i)
                    x = torch.randn(16, 16, generator=g)
                    # stands in for decoding and augmentation: many small host operations
                    # under the GIL, as PIL/numpy pipelines do, which workers run in parallel
                    for _ in range(size):
                        x = torch.tanh(x * 1.01)
                    return x

            dataset = Decoded()
        """,
        bad="""
            loader = torch.utils.data.DataLoader(dataset, batch_size=16)
            result = sum(b.to(device).sum() for b in loader)
        """,
        good="""
            # fork: the dataset class lives in this snippet, not in an importable module
            loader = torch.utils.data.DataLoader(dataset, batch_size=16, num_workers=4,
                                                 multiprocessing_context="fork")
            result = sum(b.to(device).sum() for b in loader)
        """,
        description="one epoch of a DataLoader with CPU-heavy items: `num_workers=0` vs 4 workers",
        compare="close",
        claim="time",
        steps=3,
        sweep=False,
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        for loader in fed_loaders(node, ctx):
            found = choices(loader, "num_workers")
            if found is UNKNOWN:
                continue
            if all(workers is None or (type(workers) is int and workers <= 0) for workers in found) \
                    and not in_memory_dataset(loader, ctx):
                ctx.report(loader)

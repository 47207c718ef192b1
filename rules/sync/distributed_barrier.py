from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid

# Collective barriers: every rank waits for every other, and the NCCL barrier waits for the
# device too (a one-element all-reduce, then `cudaStreamSynchronize` on the current stream).
_FUNCTIONS = frozenset({"torch.distributed.barrier", "deepspeed.comm.barrier", "deepspeed.comm.comm.barrier"})
# `accelerator.wait_for_everyone()` (Hugging Face Accelerate), `fabric.barrier()` and
# `trainer.strategy.barrier()` (Lightning): the method, and the words that name its owner.
_METHODS = {"wait_for_everyone": ("accelerator", "state"), "barrier": ("fabric", "strategy")}


def _owner_word(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id.lower()
    if isinstance(node, ast.Attribute):
        return node.attr.lower()
    return ""


class DistributedBarrierInStep(Rule):
    """## What it does
    Checks for distributed barriers in code that runs every step:
    `torch.distributed.barrier()` (`dist.barrier()`), `accelerator.wait_for_everyone()` and
    `PartialState().wait_for_everyone()` (Hugging Face Accelerate), `fabric.barrier()` / `trainer.strategy.barrier()` (Lightning)
    and `deepspeed.comm.barrier()`.

    ## Why is this bad?
    A barrier makes every rank wait for the slowest one, and with the NCCL backend it is a
    one-element all-reduce followed by a synchronize of the current CUDA stream: the host
    waits for every kernel queued so far, so the GPU runs dry while the CPU prepares the
    next step, on every rank. Collectives (`all_reduce` of the gradients, the optimizer
    step of DDP/FSDP) already order the ranks where it matters; a barrier every step only
    adds a pipeline drain and the wait for the slowest rank.

    ## Example
    ```python
    import torch.distributed as dist

    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        dist.barrier()
    ```

    ## Use instead
    Wait where the ranks really must meet: once before saving a checkpoint or reading a
    file another rank writes, after the loop, or every N steps.
    ```python
    import torch.distributed as dist

    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    dist.barrier()
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), "model.pt")
    ```

    ## Fix safety
    There is no automatic fix: a barrier may guard a file written by rank 0 and read by the
    others, or keep ranks from timing out during uneven host work. Removing or moving it is
    a decision about the program, not a rewrite.

    ## Benchmark
    The pair needs no process group: with one process a barrier is only its wait for the
    device, so the benchmark's `accelerator.wait_for_everyone()` is a stand-in that does
    what the NCCL barrier does after its one-element all-reduce,
    `torch.cuda.current_stream().synchronize()` (the CPU probe counts it as a sync; on a
    GPU it is timed as one). The wait for the slowest rank comes on top on a real group.

    ## References
    - [`torch.distributed.barrier`](https://pytorch.org/docs/stable/distributed.html#torch.distributed.barrier)
    - [Accelerate: `wait_for_everyone`](https://huggingface.co/docs/accelerate/package_reference/accelerator#accelerate.Accelerator.wait_for_everyone)
    """

    code = "PFL228"
    name = "distributed-barrier-in-step"
    message = "`{call}` makes every rank, and the host, wait for the GPU every step"
    triggers = (b"barrier", b"wait_for_everyone")
    invalid = [
        Invalid(
            """
            import torch
            import torch.distributed as dist

            def train_one_epoch(model, loader, optimizer, device):
                for step, (x, y) in enumerate(loader):
                    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
                    dist.barrier()
                    torch.distributed.barrier()
            """,
            count=2,
            note="the module alias and the full name",
        ),
        Invalid(
            """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator()
            model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
            for epoch in range(num_epochs):
                model.train()
                for step, batch in enumerate(train_dataloader):
                    outputs = model(**batch)
                    accelerator.backward(outputs.loss)
                    optimizer.step()
                    optimizer.zero_grad()
                    accelerator.wait_for_everyone()
            """,
            note="Hugging Face Accelerate, after every optimizer step",
        ),
        Invalid(
            """
            import torch
            from accelerate import PartialState

            distributed_state = PartialState()
            model = model.to(distributed_state.device)
            for _, prompts_raw in enumerate(data_loader):
                with distributed_state.split_between_processes(prompts_raw) as prompts:
                    batch = tokenizer(prompts, return_tensors="pt").to(distributed_state.device)
                    outputs = model.generate(**batch)
                distributed_state.wait_for_everyone()
                results.extend(outputs)
            """,
            note="Accelerate's `PartialState` in a generation loop over batches",
        ),
        Invalid(
            """
            import lightning as L

            class LitModel(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    loss = self.model(batch).mean()
                    self.trainer.strategy.barrier()
                    return loss

            def fit(fabric, model, loader, optimizer):
                for batch in loader:
                    loss = model(batch).mean()
                    fabric.backward(loss)
                    optimizer.step()
                    fabric.barrier()
            """,
            count=2,
            note="Lightning's strategy in a training_step, Fabric in a loop",
        ),
    ]
    valid = [
        Valid(
            """
            import torch
            import torch.distributed as dist

            def train(model, loader, optimizer, epochs):
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = model(x, y)
                        loss.backward()
                        optimizer.step()
                    dist.barrier()
                    if dist.get_rank() == 0:
                        torch.save(model.state_dict(), f"epoch{epoch}.pt")
            """,
            note="once per epoch, before a checkpoint",
        ),
        Valid(
            """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator()
            for step, batch in enumerate(train_dataloader):
                outputs = model(**batch)
                accelerator.backward(outputs.loss)
                optimizer.step()
                if step % args.checkpointing_steps == 0:
                    accelerator.wait_for_everyone()
                    accelerator.save_state(output_dir)
            accelerator.wait_for_everyone()
            """,
            note="every N steps and after the loop",
        ),
        Valid(
            """
            import threading

            barrier = threading.Barrier(2)
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                barrier.wait()
                workers.barrier()
            """,
            note="other barriers: threads, an object that is not a Lightning strategy",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)

            class OneProcess:
                # Stands in for Accelerate's state on one process (no process group on a CPU
                # build): `wait_for_everyone()` is `torch.distributed.barrier()`, which after
                # its one-element all-reduce synchronizes the current CUDA stream under NCCL.
                wait_for_everyone = property(lambda self: torch.cuda.current_stream().synchronize)

            accelerator = OneProcess()
        """,
        bad="""
            y = torch.tanh(x @ x)
            accelerator.wait_for_everyone()
            result = y
        """,
        good="""
            y = torch.tanh(x @ x)
            result = y
        """,
        description="a barrier (the NCCL barrier's stream synchronize) every step vs none",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name in _FUNCTIONS:
            ctx.report(node, call=f"{name}()")
            return
        if name is not None or not isinstance(node.func, ast.Attribute):
            return
        owners = _METHODS.get(node.func.attr)
        if owners is None:
            return
        owner = _owner_word(node.func.value)
        if any(owner.endswith(word) for word in owners):
            ctx.report(node, call=f"{ctx.text(node.func)}()")

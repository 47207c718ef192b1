from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.torch_api import is_stream_or_event
from perflint.rule import Benchmark, Invalid, Rule, Valid

# Device-wide synchronize functions (`torch.cpu.synchronize` is a no-op and not listed).
_FUNCTIONS = frozenset({
    "torch.cuda.synchronize", "torch.accelerator.synchronize", "torch.xpu.synchronize",
    "torch.mps.synchronize", "torch.mtia.synchronize",
})
_UNBOUND = ("Stream.synchronize", "Event.synchronize", "ExternalStream.synchronize")


class ExplicitSynchronize(Rule):
    """## What it does
    Checks for `torch.cuda.synchronize()` (and `torch.accelerator` / `xpu` / `mps`
    `synchronize()`), `torch.cuda.current_stream().synchronize()`,
    `torch.cuda.default_stream().synchronize()`, `stream.synchronize()` and
    `event.synchronize()` in code that runs every step.

    ## Why is this bad?
    They block the host until the device (or the stream, or the event) has finished all its
    queued work. Inside the training loop that is a full pipeline drain every step: the GPU
    idles while the CPU prepares the next step. PyTorch's `set_sync_debug_mode` does not
    report `torch.cuda.synchronize()`, so it is easy to miss.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
    ```

    ## Use instead
    Remove it, or keep it where the host really must wait: once for a timing measurement
    outside the loop, or before reading a buffer filled with `non_blocking=True` (recording
    an event and waiting on just that event keeps the rest of the queue running).
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    torch.cuda.synchronize()
    ```

    ## Fix safety
    There is no automatic fix: a synchronize may guard a `non_blocking=True` device-to-host
    copy that the host reads next, a host-side timer, or work shared with another library.
    Deleting it can give wrong results.

    ## References
    - [CUDA semantics: asynchronous execution](https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution)
    - [`torch.cuda.set_sync_debug_mode`](https://pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html): "not all synchronizing operations will trigger warning or error".
    """

    code = "PFL225"
    name = "explicit-synchronize"
    message = "`{call}` blocks the host until the GPU has finished every step"
    triggers = (b"synchronize",)
    invalid = [
        Invalid(
            """
            import torch

            stream = torch.cuda.Stream()
            for x, y in loader:
                loss = criterion(model(x), y)
                torch.cuda.synchronize()
                torch.cuda.current_stream().synchronize()
                torch.cuda.default_stream().synchronize()
                stream.synchronize()
                torch.cuda.Event().synchronize()
            """,
            count=5,
        ),
        Invalid(
            """
            import torch as T
            from torch.cuda import synchronize

            class Net(T.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.side = T.cuda.Stream()

                def forward(self, x, done_event):
                    synchronize()
                    self.side.synchronize()
                    done_event.synchronize()
                    T.cuda.Stream.synchronize(self.side)
                    return x
            """,
            count=4,
            note="aliases, a stream stored on the module, an event parameter, the unbound method",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
            torch.cuda.synchronize()
            """,
            note="once, after the loop",
        ),
        Valid(
            """
            import torch

            side = torch.cuda.Stream()
            for x, y in loader:
                done = torch.cuda.Event()
                done.record()
                side.wait_event(done)
                torch.cuda.current_stream().wait_stream(side)
                torch.cpu.synchronize()
            """,
            note="device-side waits do not block the host; the CPU synchronize is a no-op",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                loss = criterion(model(x), y)
                metrics.synchronize_between_processes()
                barrier.synchronize_all()
            """,
            note="other objects' methods",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            torch.cuda.synchronize()
            result = y
        """,
        good="""
            y = torch.tanh(x)
            result = y
        """,
        description="a `torch.cuda.synchronize()` every step vs none",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        if name in _FUNCTIONS:
            ctx.report(node, call=f"{name}()")
            return
        if name is not None:
            if name.startswith("torch.") and name.endswith(_UNBOUND) and node.args:
                ctx.report(node, call=f"{name}()")
            return
        method = ctx.method_call(node, "synchronize")
        if method is not None and is_stream_or_event(ctx.value(method[0])):
            what = "Event" if ctx.value(method[0]).ref == "torch.Event" else "Stream"
            ctx.report(node, call=f"{what}.synchronize()")

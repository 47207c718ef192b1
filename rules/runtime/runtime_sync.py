from __future__ import annotations

from perflint.rule import Rule


class RuntimeSync(Rule):
    """## What it does
    Reports a host-device sync that `perflint trace` saw the program perform, at the line of
    your code that caused it. `perflint trace` reports every traced sync, with its count and
    whether it happened every step, in some steps or once; `perflint check --trace
    TRACE.json` reports the syncs that happened every step on lines where no static rule
    reports anything ("not found statically"). A plain `perflint check` never reports it (the
    rule is off unless a trace is given).

    ## Why is this bad?
    A line that syncs every step makes the CPU wait for the GPU every step, whatever made
    static analysis miss it: a tensor that reached the line through a dictionary, a
    library, `getattr` or a helper in another module, or a sync hidden inside a call
    (`loss.backward()` through boolean-mask indexing, a metrics library's `compute()`).
    The finding says what synced (`Tensor.item`, `aten.nonzero`, ...), how many times, and
    in how many optimizer steps.

    ## Example
    `summarize` converts whatever it is given; static analysis cannot see that the values
    are device tensors, the trace can:
    ```python
    import torch
    from torch import nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(16, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


    def summarize(metrics):
        return {name: round(float(value), 4) for name, value in metrics.items()}


    history = []
    for step in range(20):
        x = torch.randn(64, 16, device=device)
        loss = model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(summarize({"loss": loss.detach()}))
    ```

    ## Use instead
    Keep the values on the device during the loop and convert them once, after it:
    ```python
    import torch
    from torch import nn

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(16, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    history = []
    for step in range(20):
        x = torch.randn(64, 16, device=device)
        loss = model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(loss.detach())
    losses = torch.stack(history).tolist()
    ```

    Silence a line whose sync is intended with `# noqa: PFL901` (a `# noqa` for a sync rule,
    PFL2xx, on the line also hides it: the sync was acknowledged).

    ## References
    - [`perflint trace`](https://github.com/perflint/perflint/blob/main/docs/trace.md): how the trace works and what it can see without a GPU
    - [`torch.cuda.set_sync_debug_mode`](https://pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html)
    """

    code = "PFL901"
    name = "runtime-sync"
    message = "`{op}` synced {times} at run time: {reason}"
    family = "runtime"
    hot_only = False
    default_enabled = False
    triggers = ()  # never reported by the static pass: its findings come from a trace

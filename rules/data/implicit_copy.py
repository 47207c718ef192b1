from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.syntax import index_parts
from perflint.facts.torch_api import FACTORIES, LEGACY_CONSTRUCTORS, is_non_blocking
from perflint.facts.values import Kind, Value
from perflint.rewrite import RewriteError, cst, set_keyword
from perflint.rule import Benchmark, FixPlan, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._constants import DATA_FACTORIES, constant_call, trivial
from ._host_built import host_built, reaching_assignment, scope_walk, written_host_built_only
from ._moves import device_move, has_star, keyword, written_after

# What `device=` does to a host index built by these factories, when the index is used only
# to index the tensor whose device it takes (see "Fix safety").
_SAME_VALUES = frozenset({"arange"})  # integer kernels: the same values on every device
_OTHER_GENERATOR = frozenset({"randperm", "randint"})  # the device's generator draws others
_HOST_DATA = frozenset({"tensor", "as_tensor"})  # built on the host and copied either way
_FIXABLE = _SAME_VALUES | _OTHER_GENERATOR | _HOST_DATA
_ARRAY_DATA = frozenset({"from_numpy", "frombuffer", "asarray"})  # an array's data: the copy is the point


# --------------------------------------------------------------------------- names
def _position(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def _factory(call: ast.Call, ctx: RuleContext) -> str | None:
    """`torch.<factory>(...)` that builds a new tensor on the host: its name, else None."""
    name = ctx.call_name(call)
    if not name or not name.startswith("torch.") or name.count(".") != 1:
        return None
    factory = name[6:]
    if factory not in FACTORIES and factory not in LEGACY_CONSTRUCTORS:
        return None
    return factory


def _pfl106_constant(call: ast.Call, factory: str, statement: ast.stmt | None, ctx: RuleContext) -> bool:
    """`torch.tensor([0, 2])`: a constant that constant-tensor-in-hot-path (PFL106) already
    reports as rebuilt every step (and copied, when it reaches the device)."""
    if factory not in DATA_FACTORIES or not constant_call(call, ctx) or trivial(call, factory):
        return False
    data = call.args[0] if call.args else None
    if not isinstance(data, (ast.List, ast.Tuple)):
        return False
    if isinstance(statement, ast.Assign) and ctx.function_node is not None:
        names = {t.id for t in statement.targets if isinstance(t, ast.Name)}
        if names and written_after(names, statement, ctx.function_node):
            return False  # a scratch buffer, which PFL106 leaves alone
    return True


def _host_tensor(value: Value) -> bool:
    """A tensor on the host that PyTorch uses as a tensor, not as a number."""
    if value.kind is Kind.TENSOR:
        return value.on_cpu and value.has_dims
    if value.kind is Kind.NDARRAY:  # `x[perm[start:end]]`: made a host tensor, then copied
        return value.has_dims
    if value.kind is Kind.SEQ:  # a tuple of index tensors: `x[(rows, cols)]`
        items = value.items if value.items is not None else (value.elem,) if value.elem is not None else ()
        return any(v is not None and v.kind is Kind.TENSOR and v.on_cpu and v.has_dims for v in items)
    return False


def _range_index(part: ast.expr, ctx: RuleContext) -> bool:
    """`x[range(n), target]` / `x[list(range(n)), target]`: PyTorch makes the range a host
    index tensor and copies it to the device."""
    if isinstance(part, ast.Call) and ctx.call_name(part) == "builtins.list" and len(part.args) == 1:
        part = part.args[0]
    return isinstance(part, ast.Call) and ctx.call_name(part) == "builtins.range"


def _plain_reference(node: ast.expr) -> bool:
    """A name or a chain of attributes on one (`x`, `self.buf`)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _root(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    assert isinstance(node, ast.Name)
    return node.id


class ImplicitHostToDeviceCopy(Rule):
    """## What it does
    Checks for tensors that live on the host (made by a factory without `device=`, such as
    `torch.arange(n)`, `torch.tensor(ids)` or `torch.as_tensor(rows)`, or moved there with
    `.cpu()`) used as an index of a tensor known to be on the accelerator, written into one,
    or moved there after being built in the same function, in code that runs every step.

    - as an index: `out[idx]`, `out[batch_idx, src_idx]`, `out[idx] = v`, NumPy index
      arrays (`obs[perm[start:end]]` with `perm = np.random.permutation(n)`), and Python
      ranges (`logits[range(n), target]`, which PyTorch turns into a host index tensor);
    - as the value written into it: `out[:, :4] = host_t`, and a 0-dim host tensor written
      through an index tensor (`out[idx] = torch.tensor(1.0)`);
    - moved there with `.to(device)` / `.cuda()` after being built in the same function
      (`idx = torch.arange(n)` ... `idx = idx.to(device)`; the chained form
      `torch.arange(n).to(device)` is `create-then-move`, PFL101).

    The accelerator tensor must be known to be there: moved with `.cuda()` / `.to(device)`,
    made with `device=device`, returned by a model given such tensors, or computed from them.
    A tensor whose device the code does not show (a function parameter, `x.device` of one)
    is not reported.

    Not reported: a 0-dim host tensor used as an operand (`out * torch.tensor(2.0)`) or as
    an index (`out[torch.tensor(3)]`): PyTorch reads it as a number, on the host, without a
    copy. A host tensor *with* dimensions as an operand of an accelerator tensor
    (`out + torch.ones(3)`) is not a copy either: PyTorch raises "Expected all tensors to be
    on the same device". Also left alone: host tensors not known to have dimensions
    (`torch.tensor(n)` may be 0-dim), NumPy data moved on purpose
    (`t = torch.from_numpy(a)` ... `t.to(device)`), and constants (`torch.tensor([0, 2])`), which
    `constant-tensor-in-hot-path` (PFL106) reports where they are built.

    ## Why is this bad?
    Before indexing, PyTorch copies every index tensor to the indexed tensor's device
    (`indice.to(self.device())` in `TensorAdvancedIndexing.cpp`), and it copies a written
    host value the same way. Each is a host-to-device copy with `non_blocking=False` from
    pageable memory: the CPU waits until the copy is done, which means waiting for all the
    GPU work queued before it. It is a sync as costly as `.item()`, hidden in an indexing
    expression, every step. Matching losses in set-prediction models do it several times per
    step with the indices of a Hungarian matcher.

    ## Example
    ```python
    import torch

    for images, labels in loader:
        logits = model(images.to(device))
        rows = torch.arange(logits.shape[0])
        picked = logits[rows, labels.to(device)]
    ```

    ## Use instead
    ```python
    import torch

    for images, labels in loader:
        logits = model(images.to(device))
        rows = torch.arange(logits.shape[0], device=logits.device)
        picked = logits[rows, labels.to(device)]
    ```
    Indices that come from the host by nature (a matcher run with SciPy) are copied once,
    together: `torch.as_tensor(rows, device=device)` in one call, or gather them in pinned
    memory and copy with `non_blocking=True`.

    ## Fix safety
    The fix passes `device=<x>.device` to the factory that built the index of `x[...]`,
    inline (`x[torch.arange(n)]`) or where the index was assigned (`idx = torch.arange(n)`),
    when `x` is a name or an attribute chain bound before that assignment and not rebound
    after it, and the index is used nowhere else than as an index of a subscript.

    It is **safe** for `torch.arange` when every use of the index indexes `x` itself: CPU and
    accelerator kernels compute `start + i * step` in the index's integer dtype, so the values
    are identical, and an index on `x`'s device gives the same result as one on the host (on
    a CPU-only run `x.device` is the CPU and nothing changes).

    It is **unsafe** when:
    - the index also indexes other tensors: one on another device (or on the host) would
      raise, since an index on an accelerator must be on the indexed tensor's device;
    - the factory is random (`torch.randperm`, `torch.randint`): the accelerator's generator
      draws other numbers than the CPU's for the same seed.

    It is **display-only** for `torch.tensor(data)` and `torch.as_tensor(data)`: with
    `device=` PyTorch still builds the tensor on the host and copies it (blocking), so the
    rewrite only makes that copy explicit; compute the values on the device or copy
    asynchronously to remove it.

    There is no fix for host tensors from elsewhere (`.cpu()` results, attributes, helpers'
    return values), for written values, or for `.to(device)` of a host tensor.

    ## References
    - `make_info` in ATen/native/TensorAdvancedIndexing.cpp: "Ensure indices are on the same device as self"
    - [A guide on good usage of `non_blocking` and `pin_memory()`](https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html): "If non_blocking=False (default), a cudaStreamSynchronize will be called after each and every cudaMemcpyAsync"
    - [Performance tuning guide: create tensors directly on the target device](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#create-tensors-directly-on-the-target-device)
    """

    code = "PFL109"
    supersedes = ("PFL101",)  # `idx = torch.arange(n)` ... `idx.to(device)`: named, one finding
    name = "implicit-host-to-device-copy"
    message = ("{what} on the host: {how} copies {it} to the device every step, a blocking copy "
               "that waits for the GPU; create {it} on the device")
    family = "data"
    fix_availability = FixAvailability.SOMETIMES
    triggers = (b"[", b".to(", b".cuda(")
    # an index made on the device that a Python number is then written through
    fix_reveals = ("PFL232",)
    invalid = [
        Invalid(
            """
            import torch

            for images, labels in loader:
                logits = model(images.to(device))
                rows = torch.arange(logits.shape[0])
                picked = logits[rows, labels.to(device)]
                logits[rows, 0] = 0.0
            """,
            count=2,
            fixed="""
            import torch

            for images, labels in loader:
                logits = model(images.to(device))
                rows = torch.arange(logits.shape[0], device=logits.device)
                picked = logits[rows, labels.to(device)]
                logits[rows, 0] = 0.0
            """,
            note="an index built on the host: the fix builds it on the indexed tensor's device",
        ),
        Invalid(
            """
            import torch

            class Head(torch.nn.Module):
                def forward(self, x, device):
                    x = x.to(device)
                    first = x[torch.arange(4)]
                    keep = torch.where(x.cpu() > 0)[0]
                    return first, x[keep]
            """,
            count=2,
            fixed="""
            import torch

            class Head(torch.nn.Module):
                def forward(self, x, device):
                    x = x.to(device)
                    first = x[torch.arange(4, device=x.device)]
                    keep = torch.where(x.cpu() > 0)[0]
                    return first, x[keep]
            """,
            note="inline factories; a `.cpu()` result has no fix",
        ),
        Invalid(
            """
            import torch
            from scipy.optimize import linear_sum_assignment

            for images, targets in loader:
                out = model(images.cuda())
                row, col = linear_sum_assignment(cost)
                src = torch.as_tensor(row, dtype=torch.int64)
                out[src] = targets.cuda()[col]
            """,
            fixed="""
            import torch
            from scipy.optimize import linear_sum_assignment

            for images, targets in loader:
                out = model(images.cuda())
                row, col = linear_sum_assignment(cost)
                src = torch.as_tensor(row, dtype=torch.int64)
                out[src] = targets.cuda()[col]
            """,
            note="indices from a Hungarian matcher: reported, and `device=` would only move the copy (display-only)",
        ),
        Invalid(
            """
            import torch

            for step, batch in enumerate(loader):
                x = batch.to(device)
                idx = torch.arange(x.shape[0])
                a = x[idx]
                b = model(x)[idx]
            """,
            count=2,
            fixed="""
            import torch

            for step, batch in enumerate(loader):
                x = batch.to(device)
                idx = torch.arange(x.shape[0], device=x.device)
                a = x[idx]
                b = model(x)[idx]
            """,
            unsafe_fixes=True,
            note="the index also indexes another tensor: unsafe",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                x = x.cuda()
                x[:, :4] = torch.zeros(4)
                idx = torch.randperm(x.shape[0])
                idx = idx.to(device)
                x[torch.randperm(4, device=device)] = torch.tensor(1.0)
            """,
            count=3,
            note="a host tensor written into a device tensor, moved after it was built, and a 0-dim "
                 "host value written through an index tensor",
        ),
        Invalid(
            """
            import numpy as np
            import torch

            obs = torch.zeros(256, 4).to(device)
            returns = torch.zeros(256).to(device)
            for epoch in range(4):
                order = np.random.permutation(256)
                for start in range(0, 256, 64):
                    batch = order[start:start + 64]
                    loss = (agent(obs[batch]) - returns[batch]).pow(2).mean()
                    loss.backward()
                    optimizer.step()
            """,
            count=2,
            note="NumPy index arrays: each indexing turns one into a host tensor and copies it",
        ),
        Invalid(
            """
            import torch

            def train(model, loader, optimizer):
                for x, target in loader:
                    logits = model(x.cuda())
                    target = target.cuda()
                    picked = logits[range(logits.shape[0]), target]
                    loss = -picked.log_softmax(-1).mean()
                    loss.backward()
                    optimizer.step()
            """,
            note="a Python range as an index: made a host tensor, then copied (no fix: `torch.arange(n, device=...)`)",
        ),
        Invalid(
            """
            import torch

            class SimCLR:
                def info_nce_loss(self, features):
                    labels = torch.cat([torch.arange(self.batch_size) for i in range(self.n_views)], dim=0)
                    labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
                    labels = labels.to(self.device)
                    mask = torch.ones(labels.shape[0], labels.shape[0]).triu(1).bool()
                    mask = mask.to(self.device)
                    return features @ features.T, labels, mask

                def train(self, train_loader):
                    for images, _ in train_loader:
                        features = self.model(images.to(self.device))
                        logits, labels, mask = self.info_nce_loss(features)
            """,
            count=2,
            note="built from factories over several statements, then moved (SimCLR's contrastive labels)",
        ),
        Invalid(
            """
            import torch

            def prepare_latent_image_ids(height, width, device, dtype):
                latent_image_ids = torch.zeros(height, width, 3)
                latent_image_ids[..., 1] = latent_image_ids[..., 1] + torch.arange(height)[:, None]
                latent_image_ids[..., 2] = latent_image_ids[..., 2] + torch.arange(width)[None, :]
                latent_image_ids = latent_image_ids.reshape(height * width, 3)
                return latent_image_ids.to(device=device, dtype=dtype)

            device = torch.device("cuda")
            for latents in loader:
                latents = latents.to(device)
                ids = prepare_latent_image_ids(64, 64, device, latents.dtype)
            """,
            note="written in place with factories only, then moved (diffusers' Flux latent ids)",
        ),
        Invalid(
            """
            import torch

            for images, targets in loader:
                if step % 2:
                    order = torch.randperm(8)
                else:
                    order = torch.arange(8)
                order = order.to(device)
                out = model(images.to(device, non_blocking=True), order)
            """,
            note="built from factories on both branches of an `if`, then moved",
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            class Blur(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.kernel = torch.ones(1, 1, 3, 3) / 9

                def forward(self, x):
                    return F.conv2d(x, self.kernel.to(x.device), padding=1)
            """,
            count=1,
            note="a host tensor kept as a plain attribute, not a buffer (SRGAN's image-quality kernels)",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for images, targets in loader:
                images = images.to(device)
                out = model(images)
                idx = torch.arange(out.shape[0], device=out.device)
                a = out[idx]
                b = out * torch.tensor(2.0)
                c = out[torch.tensor(3)]
                labels = targets[0]["labels"]
                d = labels[torch.arange(2)]
            """,
            note="an index built on the device, 0-dim host tensors (numbers), targets never moved",
        ),
        Valid(
            """
            import torch

            class Loss(torch.nn.Module):
                def forward(self, logits, target):
                    rows = torch.arange(logits.shape[0])
                    return -logits[rows, target].mean()
            """,
            note="`logits` is a parameter: where it lives is not known",
        ),
        Valid(
            """
            import torch

            def evaluate(model, x, device):
                out = model(x.to(device))
                return out[torch.arange(4)]

            for batch in loader:
                x = batch.cpu()
                a = x[torch.arange(2)]
            """,
            note="code that does not run every step; host tensors indexing host tensors",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                x = x.to(device)
                ids = torch.tensor([0, 2])
                a = x[ids]
                b = torch.arange(4).pin_memory().to(device, non_blocking=True)
                mask = x > 0
                x[mask] = torch.tensor(0.0)
            """,
            note="a constant (constant-tensor-in-hot-path's), an asynchronous copy from pinned memory, "
                 "a 0-dim host value written through a device mask (a masked_fill)",
        ),
        Valid(
            """
            import torch

            for images, targets in loader:
                labels = torch.arange(images.shape[0])
                labels = labels + targets
                labels = labels.to(device)
                if step % 2:
                    order = torch.randperm(8)
                else:
                    order = targets.argsort()
                order = order.to(device)
                out = model(images.to(device), labels, order)
            """,
            note="a factory combined with the batch's targets; a name bound on two branches, one of them data",
        ),
        Valid(
            """
            import torch

            for tokens, lengths in loader:
                padded = torch.zeros(len(lengths), 128, dtype=torch.long)
                padded[:, : tokens.shape[1]] = tokens
                padded = padded.to(device)
                out = model(padded)
            """,
            note="a host buffer filled with the batch: its values have to cross anyway",
        ),
        Valid(
            """
            import torch
            import torch.nn.functional as F

            class Blur(torch.nn.Module):
                def __init__(self, device):
                    super().__init__()
                    self.register_buffer("kernel", torch.ones(1, 1, 3, 3) / 9)
                    self.weight = torch.ones(1, 1, 3, 3, device=device)
                    self.cache = torch.zeros(4)

                def forward(self, x):
                    self.cache = x.mean(0)
                    y = F.conv2d(x, self.kernel.to(x.device), padding=1)
                    return F.conv2d(y, self.weight.to(x.device), padding=1) + self.cache.to(x.device)
            """,
            note="a registered buffer, an attribute made on the device, one assigned again every step",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            idx = torch.arange(size // 2)
            result = x[idx]
        """,
        good="""
            idx = torch.arange(size // 2, device=x.device)
            result = x[idx]
        """,
        description="`x[torch.arange(n)]` (the index copied to the device) vs the index built there",
    )

    # ----------------------------------------------------------------- subscripts
    def visit_Subscript(self, node: ast.Subscript, ctx: RuleContext) -> None:
        base = ctx.value(node.value)
        if base.kind not in (Kind.TENSOR, Kind.BATCH) or not base.on_accel:
            return
        parts = index_parts(node.slice)
        host = [p for p in parts if (_host_tensor(ctx.value(p)) and not self._constant(p, ctx))
                or _range_index(p, ctx)]
        written = self._written_value(node, parts, ctx)
        if not host and written is None:
            return
        names = [f"`{ctx.text(p)}`" for p in host]
        if host:
            what = " and ".join(names) + (" live" if len(names) > 1 else " lives")
            if written is not None:
                what += f" (and the written value `{ctx.text(written)}`)"
            how, it = "indexing a device tensor with " + ("them" if len(names) > 1 else "it"), \
                "them" if len(names) > 1 else "it"
        else:  # only a written value (checked above)
            assert written is not None
            what, how, it = f"`{ctx.text(written)}` lives", "writing it into a device tensor", "it"
        fix = self._index_fix(node, host, ctx) if host and written is None else None
        ctx.report(node, what=what, how=how, it=it, fix=fix)

    @staticmethod
    def _host_attribute(node: ast.Call, receiver: ast.Attribute, method: str, ctx: RuleContext) -> None:
        """`self.kernel.cuda()` in `forward`, with `self.kernel = torch.ones(1, 1, 3, 3)` the one
        assignment, in `__init__`: a plain attribute, which moving the module leaves on the host."""
        func, attr = ctx.function_node, receiver.attr
        cls = ctx.parent(func) if func is not None else None
        if not (isinstance(receiver.value, ast.Name) and receiver.value.id == "self" and isinstance(cls, ast.ClassDef)
                and isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) and func.name != "__init__"
                and device_move(node, ctx) is not None and not ctx.value(node).on_cpu):
            return  # (`.to(x.device)` in a forward: where the inputs are, an accelerator in training)
        stores = []
        for n in ast.walk(cls):
            if isinstance(n, ast.Constant) and n.value == attr:
                return  # `register_buffer("kernel", ...)`, `setattr(self, "kernel", ...)`: not a plain attribute
            if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Store):
                stores.append(n)
        if len(stores) != 1:
            return
        # `self.kernel = ...` itself a statement of `__init__`'s body (found without a map of the
        # whole file's parents, which this per-move question would build in most model files)
        init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        assignment = next((s for s in init.body if isinstance(s, ast.Assign) and any(t is stores[0] for t in s.targets)),
                          None) if init is not None else None
        if assignment is None:
            return
        call = assignment.value
        if isinstance(call, ast.BinOp) and isinstance(call.right, ast.Constant):
            call = call.left  # `torch.ones(1, 1, 3, 3) / 9`
        if not isinstance(call, ast.Call):
            return
        factory = _factory(call, ctx)
        if factory is None or factory in _ARRAY_DATA or keyword(call, "device") is not None or has_star(call):
            return
        info = ctx.analysis.classes.get(cls.name)
        remedy = (f"register it as a buffer (`self.register_buffer(\"{attr}\", ...)`), which moving the module "
                  "moves once") if info is not None and info.is_module else "move it once and keep the device copy"
        ctx.report(node, f"`self.{attr}` (built by `{ctx.text(call.func)}()` in `__init__`) is a plain attribute on the "
                         f"host: `.{method}()` copies it to the device every step, a blocking copy that waits for the "
                         f"GPU; {remedy}")

    @staticmethod
    def _constant(part: ast.expr, ctx: RuleContext) -> bool:
        origin, statement = ImplicitHostToDeviceCopy._origin(part, ctx)
        if origin is None:
            return False
        factory = _factory(origin, ctx)
        return factory is not None and _pfl106_constant(origin, factory, statement, ctx)

    @staticmethod
    def _origin(part: ast.expr, ctx: RuleContext) -> tuple[ast.Call | None, ast.Assign | None]:
        """The call that built `part`: itself, or the assignment that reaches it."""
        if isinstance(part, ast.Call):
            return part, None
        if isinstance(part, ast.Name):
            assignment = reaching_assignment(part.id, ctx)
            if assignment is not None:
                assert isinstance(assignment.value, ast.Call)
                return assignment.value, assignment
        return None, None

    @staticmethod
    def _written_value(node: ast.Subscript, parts: list[ast.expr], ctx: RuleContext) -> ast.expr | None:
        """The host tensor `node[...] = value` copies to the device, if it is one."""
        if not isinstance(node.ctx, ast.Store):
            return None
        statement = ctx.parent(node)
        if not isinstance(statement, ast.Assign) or not any(t is node for t in statement.targets):
            return None
        value = ctx.value(statement.value)
        if value.kind is not Kind.TENSOR or not value.on_cpu:
            return None
        indices = [ctx.value(p) for p in parts]
        tensors = [v for v in indices if v.kind in (Kind.TENSOR, Kind.SEQ, Kind.BATCH, Kind.UNKNOWN)]
        if not tensors:
            # basic indexing (ints, slices): `copy_` of a host tensor with dimensions; a
            # 0-dim one is read as a number (`fill_`)
            return statement.value if value.has_dims else None
        if not any(v.has_dims or _host_tensor(v) for v in tensors):
            return None  # indices that may be 0-dim (read as numbers), or not tensors at all
        # Advanced indexing copies a host value with `value.to(self.device())` (a host value
        # with dimensions raises), except a one-element value written through one mask on
        # the device (`masked_fill_`, which reads it as a number): any index that may be that
        # mask keeps it silent.
        if len(tensors) == 1 and tensors[0].dtype != "int" and not tensors[0].on_cpu:
            return None
        return statement.value

    def _index_fix(self, node: ast.Subscript, host: list[ast.expr], ctx: RuleContext) -> FixPlan | None:
        base = node.value
        if not _plain_reference(base):
            return None
        edits: list[tuple[int, int, str]] = []
        applicability = Applicability.SAFE
        for part in host:
            found = self._part_fix(part, base, ctx)
            if found is None:
                return None
            edit, level = found
            if edit not in edits:
                edits.append(edit)
            if level.rank < applicability.rank:
                applicability = level
        return ctx.fix(applicability, "Build the index on the indexed tensor's device with `device=`", edits)

    def _part_fix(self, part: ast.expr, base: ast.expr, ctx: RuleContext) -> tuple[tuple[int, int, str], Applicability] | None:
        call, assignment = self._origin(part, ctx)
        if call is None:
            return None
        factory = _factory(call, ctx)
        if factory not in _FIXABLE or has_star(call) or keyword(call, "device") is not None \
                or keyword(call, "out") is not None or (factory in _HOST_DATA and len(call.args) > 1):
            return None
        level = Applicability.SAFE
        if assignment is not None:
            uses = self._index_uses(part.id, ctx)  # type: ignore[attr-defined]
            if uses is None or not self._bound_before(base, assignment, ctx):
                return None
            if any(ctx.text(b) != ctx.text(base) for b in uses):
                level = Applicability.UNSAFE
        if factory in _OTHER_GENERATOR:
            level = Applicability.UNSAFE
        if factory in _HOST_DATA:
            level = Applicability.DISPLAY_ONLY
        device = f"{ctx.text(base)}.device"
        try:
            edit = ctx.rewrite(call, lambda expr: set_keyword(expr, "device", device))
        except (RewriteError, cst.ParserSyntaxError):
            return None
        return edit, level

    @staticmethod
    def _index_uses(name: str, ctx: RuleContext) -> list[ast.expr] | None:
        """The subscripted expressions `name` indexes; None when it is used any other way."""
        scope = ctx.function_node
        if scope is None:
            return None
        bases: list[ast.expr] = []
        for node in scope_walk(scope):
            if not (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)):
                continue
            parent = ctx.parent(node)
            if isinstance(parent, ast.Tuple) and isinstance(ctx.parent(parent), ast.Subscript) \
                    and ctx.parent(parent).slice is parent:  # type: ignore[union-attr]
                parent = ctx.parent(parent)
            elif not (isinstance(parent, ast.Subscript) and parent.slice is node):
                return None
            assert isinstance(parent, ast.Subscript)
            bases.append(parent.value)
        return bases

    @staticmethod
    def _bound_before(base: ast.expr, assignment: ast.Assign, ctx: RuleContext) -> bool:
        """Is `base` (`x`, `self.buf`) bound before `assignment` and never after, so that
        `base.device` there names the tensor indexed later?"""
        scope = ctx.function_node
        if scope is None:
            return False
        root, text, start = _root(base), ctx.text(base), _position(assignment)
        for node in scope_walk(scope):
            if isinstance(node, ast.Name) and node.id == root and not isinstance(node.ctx, ast.Load):
                if _position(node) >= start:
                    return False
            if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load) \
                    and _position(node) >= start and ctx.text(node) == text:
                return False
        return True

    # ----------------------------------------------------------------- moves
    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        """`idx = torch.arange(n)` ... `idx.to(device)`: built on the host, then copied."""
        method = ctx.method_call(node, "to", "cuda")
        if method is None or is_non_blocking(node) is not False:
            return
        if isinstance(method[0], ast.Attribute):
            self._host_attribute(node, method[0], method[1], ctx)
            return
        if not isinstance(method[0], ast.Name):
            return
        receiver = method[0]
        if not ctx.value(node).on_accel:
            return
        value = ctx.value(receiver)
        call, assignment = self._origin(receiver, ctx)
        factory = _factory(call, ctx) if call is not None else None
        if factory is None and not value.on_accel:
            # `labels = torch.cat([torch.arange(b) for _ in range(k)])`, then
            # `labels = (labels[None] == labels[:, None]).float()`: built from factories only
            made = host_built(receiver, ctx, names=True)
            if made is not None:
                ctx.report(node, what=f"`{receiver.id}` (built from `{ctx.text(made.func)}()`) lives",
                           how=f"`.{method[1]}()`", it="it")
            return
        if value.kind is not Kind.TENSOR or not value.on_cpu or call is None:
            return
        if factory is None or factory in _ARRAY_DATA:
            return  # array data moved to the device: the copy is the point
        if factory in _HOST_DATA and call.args and ctx.value(call.args[0]).kind is Kind.NDARRAY:
            return  # the same (`torch.tensor(array)` is tensor-from-numpy-copy's, PFL102)
        if _pfl106_constant(call, factory, assignment, ctx):
            return
        if assignment is not None and not written_host_built_only(receiver.id, assignment, call, ctx):
            return  # `buf = torch.zeros(n)`; `buf[:k] = values`: the values have to cross anyway
        ctx.report(node, what=f"`{receiver.id}` (built by `{ctx.text(call.func)}()`) lives",
                   how=f"`.{method[1]}()`", it="it")

from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.torch_api import dtype_class_of
from perflint.rewrite import RewriteError, code, cst, method_chain, set_keyword
from perflint.rule import Benchmark, FixPlan, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from perflint.facts.torch_api import LEGACY_CONSTRUCTORS
from perflint.facts.values import Kind, Value

from ._host_built import host_built
from ._moves import cast_dtype, device_move, device_target, has_star, is_false, keyword, maybe_accel_tensor, parent_map

# Factories whose values every dtype represents exactly (0, 1, or uninitialized) and that
# accept every dtype: a cast after them can be folded into `dtype=` without changing a bit.
_EXACT = frozenset({"zeros", "ones", "empty", "zeros_like", "ones_like", "empty_like"})
# Values exact in every dtype, so a cast gives the same bits on any device; but `eye` does
# not take every dtype (uint16/32/64, complex32 raise), so the cast stays a `.to(dtype)`.
_EXACT_CAST = _EXACT | {"eye"}
_DETERMINISTIC = _EXACT_CAST | {"full", "full_like", "tensor", "as_tensor"}
_RANGES = frozenset({"arange", "linspace", "logspace"})
_RANDOM = frozenset({"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like"})
# Random ops without a `device=` parameter: reported, never fixed.
_RANDOM_NO_DEVICE = frozenset({"bernoulli", "multinomial", "poisson", "normal"})
_FACTORIES = _DETERMINISTIC | _RANGES | _RANDOM | _RANDOM_NO_DEVICE
# Keywords on the factory that make `device=` impossible or change what it means.
_BLOCKING_KEYWORDS = ("out", "pin_memory", "generator", "device_type")
_INT_CALLS = frozenset({"builtins.len", "builtins.int"})
_INT_METHODS = frozenset({"numel", "dim", "ndimension", "nelement", "size"})


# Factories whose positional arguments are the sizes (one each, or one tuple of them).
_SIZED = frozenset({"zeros", "ones", "empty", "rand", "randn"})
# Methods that return a view (or a copy) of the same values in another shape.
_RESHAPES = frozenset({"unsqueeze", "squeeze", "view", "reshape", "t", "transpose", "permute", "flatten",
                       "contiguous", "unflatten"})


def _has_zero_size(call: ast.Call) -> bool:
    """`torch.empty(0)`, `torch.zeros(0, d)`, `torch.zeros((b, 0))`: no elements to copy."""
    sizes = call.args[0].elts if len(call.args) == 1 and isinstance(call.args[0], (ast.Tuple, ast.List)) \
        else call.args
    return any(isinstance(a, ast.Constant) and type(a.value) is int and a.value == 0 for a in sizes)


def _reshaped(node: ast.Call, ctx: RuleContext) -> ast.expr:
    """What a chain of shape methods (`x.unsqueeze(0).view(1, -1)`) is a view of: `x`."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _RESHAPES \
            and ctx.call_name(node) is None:
        node = node.func.value  # type: ignore[assignment]
    return node


def _is_shape(node: ast.expr) -> bool:
    """`t.size()`, `t.shape`: a `torch.Size`, which a legacy constructor reads as sizes."""
    if isinstance(node, ast.Attribute):
        return node.attr == "shape"
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
        and not node.args and not node.keywords


def _python_rows(value: Value, depth: int = 0) -> bool:
    """A list of Python values, or of tuples of them (Deformable-DETR's `spatial_shapes`:
    `(h, w)` per feature level, from `src.shape`)."""
    if value.kind is Kind.PYTHON:
        return True
    if value.kind is not Kind.SEQ or depth > 2:
        return False
    if value.elem is not None:
        return _python_rows(value.elem, depth + 1)
    return bool(value.items) and all(_python_rows(item, depth + 1) for item in value.items)  # type: ignore[union-attr]


def _literal_data(node: ast.expr) -> bool:
    """Numbers and (nested) lists or tuples of them: a constant."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _literal_data(node.operand)
    return isinstance(node, (ast.List, ast.Tuple)) and all(_literal_data(e) for e in node.elts)


def _is_int_expr(node: ast.expr, ctx: RuleContext, depth: int = 0) -> bool:
    """An expression that is a Python int by its shape: literals, `len(x)`, `x.size(0)`,
    `x.shape[0]`, `+ - * // %` of those, and a local name only ever assigned such an
    expression (or a parameter annotated `int`)."""
    if depth > 4:
        return False
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.Name):
        return _int_name(node.id, ctx, depth + 1)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_int_expr(node.operand, ctx, depth)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)):
        return _is_int_expr(node.left, ctx, depth) and _is_int_expr(node.right, ctx, depth)
    if isinstance(node, ast.Call):
        if ctx.call_name(node) in _INT_CALLS:
            return True
        func = node.func
        return isinstance(func, ast.Attribute) and func.attr in _INT_METHODS and (func.attr != "size" or bool(node.args))
    if isinstance(node, ast.Subscript):
        base = node.value
        return isinstance(base, ast.Attribute) and base.attr == "shape" and isinstance(node.slice, (ast.Constant, ast.UnaryOp))
    return False


def _int_name(name: str, ctx: RuleContext, depth: int) -> bool:
    function = ctx.function_node
    if function is None:
        return False
    values: list[ast.expr] = []
    for node in ast.walk(function):
        if isinstance(node, ast.arg) and node.arg == name:
            return isinstance(node.annotation, ast.Name) and node.annotation.id == "int" and not values
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
                if name not in names:
                    continue
                if not isinstance(target, ast.Name) or isinstance(node, ast.AugAssign) or node.value is None:
                    return False  # unpacked, augmented, or annotated only: not a plain int
                values.append(node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.comprehension, ast.Global, ast.Nonlocal)):
            bound = node.target if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) else node
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(bound)) or \
                    name in getattr(node, "names", ()):
                return False
    return bool(values) and all(_is_int_expr(v, ctx, depth) for v in values)


def _int_arange(call: ast.Call, ctx: RuleContext) -> bool:
    """`torch.arange` with integer arguments or an integer dtype: both kernels compute
    `start + i * step` in int64, exactly."""
    dtype = keyword(call, "dtype")
    if dtype is not None:
        return dtype_class_of(ctx.qualname(dtype.value)) == "int"
    values = list(call.args) + [k.value for k in call.keywords if k.arg in ("start", "end", "step")]
    return bool(values) and all(_is_int_expr(v, ctx) for v in values)


class CreateThenMove(Rule):
    """## What it does
    Checks for a tensor created on the CPU by a factory (`torch.zeros`, `torch.ones`,
    `torch.full`, `torch.eye`, `torch.tensor`, `torch.arange`, `torch.rand`, ...) and then
    moved with `.cuda()`, `.to(device)`, `.to(other_tensor)` or `.type_as(other_tensor)`, in
    code that runs every step. It also checks for Python data (a list built this step, a
    `list[float]` argument) turned into a tensor on the device with
    `torch.tensor(data, device=...)` or `torch.as_tensor(data, device=...)` (a NumPy array
    too), for NumPy data known to be computed on the host moved with
    `torch.from_numpy(a).to(device)` (an array of unknown origin may be the batch), and for legacy
    constructors, which always build on the host (`torch.Tensor([w, h]).to(device)`,
    `torch.Tensor(next_obs).to(device)` of an environment's NumPy observation; not of a tensor
    that may be on the device). Constant data is PFL106's, and a host tensor built into a
    variable and moved later (`idx = torch.arange(n)` ... `idx.to(device)`) is PFL109's where
    that rule reports it: one finding each, not two. Factories
    joined, scaled or passed through an elementwise function before the move
    (`torch.cat([torch.ones(n), torch.zeros(m)]).to(device)`, `(torch.ones(n) * i).to(device)`,
    `torch.exp(-c * torch.arange(half) / half).to(t.device)`) are reported too, with no fix.

    ## Why is this bad?
    The tensor is first built in host memory, then copied to the GPU. The copy is a blocking
    host-to-device transfer: the CPU waits for it, every step. Random factories also run
    the CPU generator. Passing `device=` builds the tensor on the GPU directly.

    Host *data* is different: `torch.tensor(data, device=device)` also builds the tensor on
    the host and copies it with a blocking transfer (PyTorch does exactly
    `torch.tensor(data).to(device)`), so `device=` tidies the code but does not remove the
    copy. Compute the values on the device instead (from tensors already there), build the
    tensor once when the data does not change, or copy from pinned memory with
    `non_blocking=True`.

    Only code that runs every step is checked: a factory moved once at set-up costs a few
    microseconds once, and reporting it would bury the findings that matter.

    ## Example
    ```python
    for x, y in loader:
        x = x.to(device)
        mask = torch.ones(x.shape[0], 1).to(device)
        noise = torch.randn(x.shape).cuda()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        x = x.to(device)
        mask = torch.ones(x.shape[0], 1, device=device)
        noise = torch.randn(x.shape, device=device)
    ```

    ## Fix safety
    The fix passes `device=` to the factory (and `dtype=` when the move also casts, as in
    `.to(device, torch.float16)`, `.to(other)`, `.type_as(other)` or `.cuda().half()`), and
    drops `non_blocking=`: nothing is copied from the host any more, so there is nothing to
    overlap. For `tensor(data)` and `as_tensor(data)` the data is still copied: the fix
    gives the same tensor in one call, and a non-constant `data` stays reported.

    It is **safe** for deterministic factories: `zeros`, `ones`, `empty` (uninitialized
    either way), `eye`, `full`, the `*_like` forms of these, `tensor(data)` and
    `as_tensor(data)` (an exact copy of the same data), and `arange` with integer
    arguments or an integer `dtype=` (both kernels compute `start + i * step` in int64).
    A cast is folded into `dtype=` only for `zeros`, `ones` and `empty`, whose values every
    dtype holds exactly and which accept every dtype; `eye` keeps it as `.to(dtype)` (its
    0s and 1s cast exactly on any device, but it rejects some dtypes). `.type_as(other)`
    becomes `device=other.device.type`, because `type_as` moves to the *current* device of
    that type, not to `other`'s device index.

    It is **unsafe** when:
    - the factory is random (`rand`, `randn`, `randint`, `randperm`, `*_like`): CPU and CUDA
      generators give different numbers for the same seed, and the rewrite shifts every later
      draw of both generators;
    - the factory is `linspace`, `logspace` or a floating-point `arange`: CPU and CUDA kernels
      are not guaranteed to give bit-identical values;
    - the factory has `requires_grad=True`: the original result is a non-leaf copy whose
      gradient flows back to a CPU leaf, the rewritten one is the leaf itself;
    - the move also casts a factory whose values are not exact in every dtype (`tensor`,
      `full`, `arange`, the random ones): the fix keeps the cast as `.to(dtype)`, but it now
      runs on the GPU, and out-of-range float-to-integer conversions are undefined and differ
      between CPU and CUDA kernels.

    There is no fix when `device=` cannot be written (a `*args` / `**kwargs` that could
    already carry it, `out=`, `pin_memory=`, `generator=`, `copy=True`, `memory_format=`,
    `.cuda(i)` with an `i` of unknown type), and for `bernoulli`, `multinomial`, `poisson` and
    `normal`, which take their device from their input tensors. `.cuda(i)` becomes
    `device="cuda:N"` for a literal, `device=torch.device("cuda", i)` for an integer
    expression (an `int` parameter, `len(...)`, `x.shape[0]`, a local only assigned those),
    and has no fix when `i` could also be a string or a device.

    ## References
    - [Performance tuning guide: create tensors directly on the target device](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#create-tensors-directly-on-the-target-device)
    - [Reproducibility](https://pytorch.org/docs/stable/notes/randomness.html): "results may not be reproducible between CPU and GPU executions, even when using identical seeds"
    """

    code = "PFL101"
    name = "create-then-move"
    message = "`{factory}()` builds the tensor on the CPU and copies it to the device every step; pass `device=`"
    family = "data"
    fix_availability = FixAvailability.SOMETIMES
    triggers = (b".cuda(", b".to(", b".type_as(")
    invalid = [
        Invalid(
            """
            import torch

            class Embed(torch.nn.Module):
                def forward(self, x, wavelengths: list[float]):
                    waves = torch.tensor(wavelengths, device=x.device)
                    lengths = torch.as_tensor([len(w) for w in self.words], device=x.device)
                    scale = torch.Tensor([x.shape[2], x.shape[3]]).to(x.device)
                    return x * waves.view(1, -1, 1, 1), lengths, scale
            """,
            count=3,
            note="host data copied every step; `device=` cannot avoid that copy",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                x = x.to(device)
                a = torch.zeros(x.shape[0], 3).to(device)
                b = torch.ones(4).cuda()
                c = torch.tensor([1.0, 2.0]).to(x.device)
                d = torch.eye(3).cuda(non_blocking=True)
                e = torch.arange(x.shape[0]).cuda(0)
                f = torch.full((2,), 1.5, device="cpu").to(device)
            """,
            count=6,
            fixed="""
            import torch

            for x, y in loader:
                x = x.to(device)
                a = torch.zeros(x.shape[0], 3, device=device)
                b = torch.ones(4, device="cuda")
                c = torch.tensor([1.0, 2.0], device=x.device)
                d = torch.eye(3, device="cuda")
                e = torch.arange(x.shape[0], device="cuda:0")
                f = torch.full((2,), 1.5, device=device)
            """,
        ),
        Invalid(
            """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x):
                    pad = torch.zeros(2, 3, dtype=torch.float32).to(x)
                    ones = torch.ones(3).cuda().half()
                    cast = torch.zeros(3).to(x.device, torch.bfloat16)
                    like = torch.empty(3).type_as(x)
                    return pad, ones, cast, like
            """,
            count=4,
            fixed="""
            import torch

            class Net(torch.nn.Module):
                def forward(self, x):
                    pad = torch.zeros(2, 3, dtype=x.dtype, device=x.device)
                    ones = torch.ones(3, device="cuda", dtype=torch.float16)
                    cast = torch.zeros(3, device=x.device, dtype=torch.bfloat16)
                    like = torch.empty(3, device=x.device.type, dtype=x.dtype)
                    return pad, ones, cast, like
            """,
            note="moves that also cast fold the dtype into exact factories",
        ),
        Invalid(
            """
            import torch

            class Net(torch.nn.Module):
                def forward(self, x, gpu: int):
                    rows = x.shape[0]
                    return torch.ones(rows).cuda(gpu), torch.zeros(2).cuda(device=rows % 2)
            """,
            count=2,
            fixed="""
            import torch

            class Net(torch.nn.Module):
                def forward(self, x, gpu: int):
                    rows = x.shape[0]
                    return torch.ones(rows, device=torch.device("cuda", gpu)), torch.zeros(2, device=torch.device("cuda", rows % 2))
            """,
            note="`.cuda(i)` with an integer index",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                noise = torch.randn(8, 3).to(device)
                perm = torch.randperm(8).cuda()
                grid = torch.linspace(0, 1, 5).to(device)
            """,
            count=3,
            fixed="""
            import torch

            for x, y in loader:
                noise = torch.randn(8, 3, device=device)
                perm = torch.randperm(8, device="cuda")
                grid = torch.linspace(0, 1, 5, device=device)
            """,
            unsafe_fixes=True,
            note="random factories and float ranges: unsafe fixes",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                noise = torch.randn(8, 3).to(device)
                scale = torch.tensor([0.5]).to(device, torch.float16)
            """,
            count=2,
            fixed="""
            import torch

            for x, y in loader:
                noise = torch.randn(8, 3).to(device)
                scale = torch.tensor([0.5]).to(device, torch.float16)
            """,
            note="without --unsafe-fixes nothing changes",
        ),
        Invalid(
            """
            import torch

            def step(x, opts, *shape):
                b = torch.zeros(*shape).to(x.device, copy=True)
                c = torch.bernoulli(torch.full((3,), 0.5)).cuda()
                d = torch.zeros(3).cuda(rank)
                e = torch.zeros(3).to(x * 2)
                return b, c, d, e

            for batch in loader:
                step(model(batch), {}, 3)
            """,
            count=4,
            fixed="""
            import torch

            def step(x, opts, *shape):
                b = torch.zeros(*shape).to(x.device, copy=True)
                c = torch.bernoulli(torch.full((3,), 0.5)).cuda()
                d = torch.zeros(3).cuda(rank)
                e = torch.zeros(3).to(x * 2)
                return b, c, d, e

            for batch in loader:
                step(model(batch), {}, 3)
            """,
            note="reported, but no fix: copy=True, no device parameter, an index of unknown type, "
                 "a target tensor that is not a plain name",
        ),
        Invalid(
            """
            from torch import zeros

            for x, y in loader:
                z = zeros(3).cuda().half()
            """,
            fixed="""
            from torch import zeros
            import torch

            for x, y in loader:
                z = zeros(3, device="cuda", dtype=torch.float16)
            """,
            note="the dtype needs `torch`: the import is added",
        ),
        Invalid(
            """
            import torch

            class ITMHead(torch.nn.Module):
                def forward(self, sim, bs):
                    labels = torch.cat([torch.ones(bs, dtype=torch.long),
                                        torch.zeros(2 * bs, dtype=torch.long)]).to(sim.device)
                    offsets = (torch.ones(bs, 1) * 3).to(sim.device)
                    return torch.nn.functional.cross_entropy(sim + offsets, labels)
            """,
            count=2,
            note="factories joined or scaled before the move (BLIP's image-text matching labels): no fix",
        ),
        Invalid(
            """
            import math
            import torch

            class TimestepEmbedder(torch.nn.Module):
                def forward(self, t, dim):
                    half = dim // 2
                    freqs = torch.exp(-math.log(10000) * torch.arange(start=0, end=half, dtype=torch.float32)
                                      / half).to(device=t.device)
                    args = t[:, None].float() * freqs[None]
                    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
            """,
            note="an elementwise function of a scaled factory, moved every forward (DiT's timestep frequencies): no fix",
        ),
        Invalid(
            """
            import torch

            class InfoNCE(torch.nn.Module):
                def forward(self, features, batch_size, n_views):
                    labels = torch.cat([torch.arange(batch_size) for _ in range(n_views)], dim=0).to(features.device)
                    positions = torch.arange(features.shape[0]).unsqueeze(0).expand(2, -1).to(features.device)
                    same = (torch.arange(4)[None] == torch.arange(4)[:, None]).float().to(features.device)
                    return labels, positions, same
            """,
            count=3,
            note="a join of a comprehension, a chain of shape methods, a comparison: all made of factories (SimCLR)",
        ),
        Invalid(
            """
            import torch

            device = torch.device("cuda")

            class Attention(torch.nn.Module):
                def forward(self, batch_H, text, batch_max_length=25):
                    batch_size = batch_H.size(0)
                    num_steps = batch_max_length + 1
                    output_hiddens = torch.FloatTensor(batch_size, num_steps, 256).fill_(0).to(device)
                    one_hot = torch.FloatTensor(batch_size, 38).zero_().to(device)
                    return output_hiddens, one_hot
            """,
            count=2,
            note="a legacy constructor given sizes, then filled, then moved (deep-text-recognition-benchmark): no fix",
        ),
        Invalid(
            """
            import numpy as np
            import torch

            cuda = True if torch.cuda.is_available() else False
            Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
            for i, (imgs, _) in enumerate(dataloader):
                z = Tensor(np.random.normal(0, 1, (imgs.shape[0], 100)))
                valid = Tensor(imgs.size(0), 1).fill_(1.0)
                loss = adversarial_loss(discriminator(generator(z)), valid)
            """,
            note="a CUDA legacy type given NumPy data (PyTorch-GAN): a copy every step; given sizes, it is made there",
        ),
        Invalid(
            """
            import torch

            class MultiBoxLoss(torch.nn.Module):
                def forward(self, conf_loss_neg, device):
                    n_priors = conf_loss_neg.size(1)
                    ranks = torch.LongTensor(range(n_priors)).unsqueeze(0).expand_as(conf_loss_neg).to(device)
                    return conf_loss_neg * ranks
            """,
            note="a legacy constructor of a `range` (an `arange`), expanded to the shape of a device tensor "
                 "(sgrvinod's SSD tutorial): `expand_as` reads only the shape",
        ),
        Invalid(
            """
            import torch

            class DeformableTransformer(torch.nn.Module):
                def forward(self, srcs):
                    spatial_shapes = []
                    for src in srcs:
                        bs, c, h, w = src.shape
                        spatial_shapes.append((h, w))
                    return torch.as_tensor(spatial_shapes, dtype=torch.long, device=srcs[0].device)
            """,
            note="a list of `(h, w)` tuples of Python ints (Deformable-DETR's feature-level shapes), copied every "
                 "forward",
        ),
        Invalid(
            """
            import torch

            def translate(model, device, max_len=50):
                trg_indexes = [2]
                for i in range(max_len):
                    trg_tensor = torch.LongTensor(trg_indexes).unsqueeze(0).to(device)
                    pred_token = model(trg_tensor).argmax(2)[:, -1]
                    trg_indexes.append(int(pred_token))
            """,
            count=1,
            note="host data reshaped before the move is the same copy (pytorch-seq2seq's decoding loop)",
        ),
        Invalid(
            """
            import torch

            class Decoder(torch.nn.Module):
                def __init__(self, pad_idx, device):
                    super().__init__()
                    self.pad_idx = pad_idx
                    self.device = device

                def forward(self, x):
                    padding = torch.zeros(x.shape[0], x.shape[1], 2).fill_(self.pad_idx).to(self.device)
                    return torch.cat((padding, x), dim=2)
            """,
            count=1,
            note="filled with a value of unknown type, still made on the host (pytorch-seq2seq's ConvS2S decoder)",
        ),
        Invalid(
            """
            import torch
            from config import cfg

            class Cell(torch.nn.Module):
                def forward(self, inputs):
                    state = torch.zeros(inputs.size(0), 4).to(cfg.GLOBAL.DEVICE)
                    return inputs + state
            """,
            fixed="""
            import torch
            from config import cfg

            class Cell(torch.nn.Module):
                def forward(self, inputs):
                    state = torch.zeros(inputs.size(0), 4, device=cfg.GLOBAL.DEVICE)
                    return inputs + state
            """,
            note="a device a config module holds, known by its name (Precipitation-Nowcasting's `cfg.GLOBAL.DEVICE`)",
        ),
        Invalid(
            """
            import torch
            from torch.autograd import Variable

            for x, y in loader:
                out = model(x.cuda(non_blocking=True))
                target = Variable(torch.rand(out.size(0), 1) * 0.5 + 0.7).cuda()
                ((out - target) ** 2).mean().backward()
            """,
            count=1,
            note="`Variable(t)` (torch < 0.4) is the tensor itself (SRGAN's soft labels)",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            class Loss(torch.nn.Module):
                def forward(self, chosen, rejected, timestep):
                    empty = torch.Tensor([]).to(chosen.device)
                    if not isinstance(timestep, torch.Tensor):
                        timestep = torch.tensor([timestep], device=chosen.device)
                    return torch.cat((chosen, empty)), timestep
            """,
            note="an empty copy returns at once; a fallback for callers passing a Python number",
        ),
        Valid(
            """
            import torch

            def step(opts):
                return torch.zeros(3, **opts).cuda()

            for batch in loader:
                step({"device": "cuda"})
            """,
            note="**kwargs may already hold device=: the tensor's device is unknown, the move may be a no-op",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                a = torch.zeros(3, device=device)
                b = torch.ones(3).to(torch.float16)
                c = torch.zeros(3).to("cpu")
                d = x.to(device)
                e = torch.from_numpy(arr).to(device)
                f = torch.zeros(3).to(memory_format=torch.channels_last)
            """,
            note="already on the device, dtype-only casts, CPU targets, batches, from_numpy of an array of unknown origin",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("w", torch.ones(3).cuda())
            """,
            note="set-up code runs once",
        ),
        Valid(
            """
            import torch

            for x, y in loader:
                y = y.cpu()
                a = torch.zeros(3).to(y)
                b = torch.ones(3).type_as(y)
            """,
            note="`.to(t)` / `.type_as(t)` of a tensor known to be on the CPU is not a move",
        ),
        Valid(
            """
            import torch

            for tokens, lengths in loader:
                tokens = tokens.to(device, non_blocking=True)
                mask = (torch.arange(tokens.shape[1])[None] < lengths[:, None]).to(device)
                scale = (torch.ones(3) * weights).to(device)
                loss = model(tokens, mask, scale)
            """,
            note="a factory combined with a batch (the lengths must cross anyway) or with a value of unknown kind",
        ),
        Valid(
            """
            import torch

            class Pix2PixHDModel(torch.nn.Module):
                def get_edges(self, t):
                    edge = torch.cuda.ByteTensor(t.size()).zero_()
                    edge[:, :, :, 1:] = edge[:, :, :, 1:] | (t[:, :, :, 1:] != t[:, :, :, :-1])
                    return edge.float()
            """,
            note="a CUDA legacy type given a `torch.Size` allocates on the device: nothing crosses (pix2pixHD)",
        ),
        Valid(
            """
            import torch

            def sample(model, device, n, steps):
                for _ in range(steps):
                    noise = torch.FloatTensor(n).unsqueeze(0).to(device)
                    model(noise).sum().backward()
            """,
            note="a legacy constructor given a size (a Python int) holds no host data",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            n = 1024
        """,
        bad="""
            result = torch.ones(n, n).to(device)
        """,
        good="""
            result = torch.ones(n, n, device=device)
        """,
        description="`torch.ones(n, n).to(device)` vs `torch.ones(n, n, device=device)`",
    )

    composite_message = ("`{what}` builds the tensor on the CPU and copies it to the device every step, "
                         "a blocking copy that waits for the GPU; create its parts with `device=`")
    host_data_message = ("`{factory}()` copies host data to the device every step, a blocking copy "
                         "that waits for the GPU; compute it on the device, or build it once")

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        move = device_move(node, ctx)
        if move is None:
            self._host_data_to_device(node, ctx)
            return
        casts: list[ast.Call] = []
        inner = move.receiver
        while isinstance(inner, ast.Call) and cast_dtype(inner, ctx, "torch") is not None:
            casts.append(inner)
            inner = inner.func.value  # type: ignore[attr-defined]
        made = host_built(inner, ctx, names=True)
        if made is not None and made is not inner and not ctx.value(move.receiver).on_accel:
            # `torch.cat([torch.ones(n), torch.zeros(m)]).to(device)`, `(torch.ones(n) * i).to(device)`,
            # `torch.arange(n).unsqueeze(0).to(device)`: no fix (each factory needs `device=`),
            # the copy is the same
            what = f"{ctx.text(made.func)}()"
            if isinstance(inner, ast.Call):
                outer = f".{inner.func.attr}" if isinstance(inner.func, ast.Attribute) \
                    and ctx.call_name(inner) is None else ctx.text(inner.func)
                what = f"{outer}()` of `{what}"
            ctx.report(node, self.composite_message, what=what)
            return
        if not isinstance(inner, ast.Call):
            return
        data = _reshaped(inner, ctx)
        if data is not inner and isinstance(data, ast.Call) and self._host_data_made(data, ctx) \
                and ctx.value(move.receiver).on_cpu:
            # `torch.LongTensor(trg_indexes).unsqueeze(0).to(device)`: the same copy of host
            # data, a view of it (no fix: the shape method has to move after the copy)
            ctx.report(node, self.host_data_message, factory=ctx.text(data.func))
            return
        qualname = ctx.call_name(inner)
        if not qualname or not qualname.startswith("torch.") or qualname.count(".") != 1:
            return
        factory = qualname[6:]
        if factory == "from_numpy" and inner.args and ctx.value(inner.args[0]).kind is Kind.NDARRAY \
                and not ctx.value(inner.args[0]).data and ctx.value(move.receiver).on_cpu:
            # `torch.from_numpy(np.random.choice(...)).long().to(device)`: NumPy data known to be
            # computed on the host, copied from pageable memory every step (no fix: where it
            # should be made depends on the code). An array of unknown origin may be the batch.
            ctx.report(node, self.host_data_message, factory=ctx.text(inner.func))
            return
        if inner.args and isinstance(inner.args[0], (ast.List, ast.Tuple)) and not inner.args[0].elts:
            return  # `torch.tensor([]).to(device)`: an empty copy returns at once
        if factory in _SIZED and _has_zero_size(inner):
            return  # `torch.empty(0).to(tokens)`: so does the copy of no elements
        if factory in LEGACY_CONSTRUCTORS and inner.args and not isinstance(inner.args[0], ast.Starred) \
                and not maybe_accel_tensor(inner.args[0], ctx):
            # `torch.Tensor([w, h, w, h]).to(device)`, `torch.Tensor(next_obs).to(device)`
            # (NumPy data from an environment): no fix (a legacy constructor reads a size from
            # an int argument, and its dtype is the default one)
            ctx.report(node, self.host_data_message, factory=ctx.text(inner.func))
            return
        if factory not in _FACTORIES or keyword(inner, "out") is not None:
            return
        if not ctx.value(move.receiver).on_cpu:
            return  # already on a device, or not known to be on the CPU
        if factory == "as_tensor" and not self._host_data(inner, ctx):
            return
        fix = self._fix(node, move, inner, factory, casts, ctx)
        # Host data is copied whether it is built on the CPU first or with `device=`: the
        # fix tidies the code, the copy stays (and is still reported).
        message = self.host_data_message if factory in ("tensor", "as_tensor") else None
        ctx.report(node, message, factory=ctx.text(inner.func), fix=fix)

    def _host_data_to_device(self, node: ast.Call, ctx: RuleContext) -> None:
        """`torch.tensor(lengths, device=x.device)`: Python data built on the host every step
        and copied to the device (a constant is PFL106's)."""
        qualname = ctx.call_name(node)
        if qualname and qualname.startswith("torch.cuda.") and qualname[11:] in LEGACY_CONSTRUCTORS and node.args:
            # `Tensor(np.random.normal(0, 1, (b, d)))` with `Tensor = torch.cuda.FloatTensor`
            data = ctx.value(node.args[0])
            if _is_shape(node.args[0]):
                return  # `torch.cuda.ByteTensor(t.size())`: a size, the tensor is made on the device
            if data.kind is Kind.NDARRAY or (data.kind is Kind.SEQ and not maybe_accel_tensor(node.args[0], ctx)):
                ctx.report(node, self.host_data_message, factory=ctx.text(node.func))
            return
        if qualname not in ("torch.tensor", "torch.as_tensor") or not node.args:
            return
        device = keyword(node, "device")
        if device is None or device_target(device.value, ctx) in (None, "cpu"):
            return
        source = node.args[0]
        if _literal_data(source):
            return
        value = ctx.value(source)
        python_data = value.kind in (Kind.PYTHON, Kind.NDARRAY) or (value.kind is Kind.SEQ and _python_rows(value))
        if python_data or isinstance(source, (ast.List, ast.Tuple, ast.ListComp)) and value.kind is not Kind.TENSOR:
            if isinstance(source, (ast.List, ast.Tuple)) \
                    and any(ctx.value(e).kind is not Kind.PYTHON for e in source.elts):
                return  # elements that may be tensors: PFL215's
            ctx.report(node, self.host_data_message, factory=ctx.text(node.func))

    @classmethod
    def _host_data_made(cls, call: ast.Call, ctx: RuleContext) -> bool:
        """`torch.tensor(rows)`, `torch.LongTensor(indexes)`: a tensor made from Python or
        NumPy data known to be in host memory (not sizes, not the batch)."""
        qualname = ctx.call_name(call) or ""
        if not qualname.startswith("torch.") or not call.args or isinstance(call.args[0], ast.Starred):
            return False
        data = ctx.value(call.args[0])
        if qualname[6:] in LEGACY_CONSTRUCTORS:  # a list or an array: not sizes, not a range (an arange)
            if isinstance(call.args[0], ast.Call) and ctx.call_name(call.args[0]) in ("builtins.range", "builtins.list"):
                return False
            return data.kind is Kind.SEQ or (data.kind is Kind.NDARRAY and not data.data)
        if qualname in ("torch.tensor", "torch.as_tensor"):
            return cls._host_data(call, ctx) and data.kind is not Kind.UNKNOWN
        return False

    @staticmethod
    def _host_data(call: ast.Call, ctx: RuleContext) -> bool:
        """`as_tensor(t)` of a tensor that may already be on the GPU is a no-op, not a copy."""
        if not call.args:
            return False
        value = ctx.value(call.args[0])
        return value.not_tensor or value.on_cpu

    def _fix(self, node: ast.Call, move, inner: ast.Call, factory: str, casts: list[ast.Call],
             ctx: RuleContext) -> FixPlan | None:
        if not move.fixable or factory in _RANDOM_NO_DEVICE or has_star(inner):
            return None
        if any(keyword(inner, k) is not None for k in _BLOCKING_KEYWORDS):
            return None
        if factory == "as_tensor" and len(inner.args) > 1:
            return None  # dtype / device given positionally
        alias = ctx.torch_alias()
        imports: list[str] = []
        if alias is None:
            alias, needs_import = "torch", True
        else:
            needs_import = False
        device = move.device
        if device is None and move.method == "cuda":
            index = node.args[0] if node.args else getattr(keyword(node, "device"), "value", None)
            if index is not None and _is_int_expr(index, ctx):  # `.cuda(local_rank)`
                device = f'{alias}.device("cuda", {ctx.text(index)})'
                if needs_import:
                    imports = ["torch"]
        if device is None:
            return None
        dtypes = [cast_dtype(c, ctx, alias) for c in reversed(casts)]
        if move.dtype is not None:
            dtypes.append(move.dtype)
        span = node
        if factory in _EXACT and ctx.statement is not None:
            parents = parent_map(ctx.statement)
            while True:
                attr = parents.get(span)
                outer = parents.get(attr) if isinstance(attr, ast.Attribute) else None
                if not (isinstance(outer, ast.Call) and outer.func is attr):
                    break
                dtype = cast_dtype(outer, ctx, alias)
                if dtype is None:
                    break
                dtypes.append(dtype)
                span = outer
        dtype = dtypes[-1] if dtypes else None
        if needs_import and dtype is not None and dtype.startswith("torch."):
            imports = ["torch"]  # a dtype spelled by the fix (`.half()` -> `torch.float16`)
        applicability = Applicability.SAFE
        if factory in _RANDOM:
            applicability = Applicability.UNSAFE
        elif factory in _RANGES and not (factory == "arange" and _int_arange(inner, ctx)):
            applicability = Applicability.UNSAFE
        requires_grad = keyword(inner, "requires_grad")
        if requires_grad is not None and not is_false(requires_grad.value):
            applicability = Applicability.UNSAFE
        fold = factory in _EXACT
        if dtype is not None and factory not in _EXACT_CAST:
            applicability = Applicability.UNSAFE
        start, end = ctx.offsets(span)
        inner_end = ctx.offsets(inner)[1]
        if "#" in ctx.source.text[inner_end:end]:
            return None  # a comment inside the removed part: do not lose it
        depth = len(casts) + 1 + (self._depth(span, node))

        def transform(expr: cst.BaseExpression) -> cst.BaseExpression:
            calls = method_chain(expr, depth)
            made = set_keyword(calls[-1], "device", device)
            if dtype is not None and fold:
                made = set_keyword(made, "dtype", dtype)
            if dtype is not None and not fold:
                return cst.parse_expression(f"{code(made)}.to({dtype})")
            return made

        try:
            edit = ctx.rewrite(span, transform)
        except (RewriteError, cst.ParserSyntaxError):
            return None
        what = "create the tensor on the device with `device=`" + (" and `dtype=`" if dtype and fold else "")
        return ctx.fix(applicability, what[0].upper() + what[1:], [edit], imports=imports)

    @staticmethod
    def _depth(span: ast.expr, node: ast.Call) -> int:
        """How many method calls `span` wraps around `node`."""
        depth = 0
        current: ast.expr = span
        while current is not node:
            current = current.func.value  # type: ignore[attr-defined]
            depth += 1
        return depth

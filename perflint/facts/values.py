"""The abstract values the analyzer tracks: "what kind of thing is this expression?".

Precision depends on telling tensors from everything else, so the lattice is richer than
tensor / not-tensor: a DataLoader yields batches, a module call yields a tensor, numpy and
Python values are definitely not tensors, and imports are references whose qualified names
rules match on.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass, replace


class Kind(enum.Enum):
    TENSOR = "tensor"
    BATCH = "batch"  # an element of a data loader: a tensor, a tuple or a dict of tensors
    LOADER = "loader"  # iterating it yields batches
    MODULE = "module"  # an nn.Module (calling it yields a tensor)
    OPTIMIZER = "optimizer"
    SEQ = "seq"  # a Python list/tuple/iterator; `elem` / `items` describe its contents
    NDARRAY = "ndarray"
    DEVICE = "device"
    DTYPE = "dtype"
    NONE = "none"
    PYTHON = "python"  # any other definitely-not-a-tensor value (numbers, strings, dicts, ...)
    REF = "ref"  # a module, function or class reference with a qualified name
    FUNC = "func"  # a function defined in this file
    CLASS = "class"  # a class defined in this file
    OBJECT = "object"  # an instance of a non-module class
    UNKNOWN = "unknown"


NOT_TENSOR_KINDS = frozenset(
    {
        Kind.LOADER,
        Kind.OPTIMIZER,
        Kind.SEQ,
        Kind.NDARRAY,
        Kind.DEVICE,
        Kind.DTYPE,
        Kind.NONE,
        Kind.PYTHON,
        Kind.REF,
        Kind.FUNC,
        Kind.CLASS,
        Kind.MODULE,
        Kind.OBJECT,
    }
)


@dataclass(frozen=True)
class Value:
    kind: Kind
    dtype: str | None = None  # tensors: "bool", "int" or "float" when known
    zero_dim: bool = False  # tensors known to have no dimensions (full reductions, losses)
    # tensors known to have at least one dimension (`torch.arange(n)`, `torch.cat(...)`,
    # `torch.as_tensor(array)`): where that matters, a 0-dim tensor is read as a number
    # (an index, a scalar operand) and one with dimensions is used as a tensor
    has_dims: bool = False
    elem: Value | None = None  # SEQ / LOADER / BATCH: what iterating yields
    items: tuple[Value, ...] | None = None  # SEQ: positional contents when known (tuples)
    ref: str | None = None  # REF: qualified name; FUNC/CLASS/OBJECT/MODULE: local key
    loss: bool = False  # MODULE / FUNC: a loss (calling it gives a 0-dim tensor)
    device: str | None = None  # TENSOR / BATCH: "cpu" or "accel" when known; DEVICE: the same
    # BATCH: yielded by a data loader (iterating those makes a data loop); NDARRAY: known to be
    # an array only from an `isinstance` check, so it may be a batch's
    data: bool = False
    # LOADER / BATCH: the `DataLoader(...)` call (an ast node of this file) that made the loader
    # or yielded the batch, so configuration rules can look at its arguments.
    origin: object | None = None

    @property
    def on_cpu(self) -> bool:
        """Known to live in host memory: reading it never waits for a GPU."""
        return self.device == "cpu"

    @property
    def on_accel(self) -> bool:
        """Known to live on an accelerator: moved there (`.cuda()`, `.to(device)`), made there
        (`device=device`), or computed from such tensors."""
        return self.device == "accel"

    @property
    def is_tensor(self) -> bool:
        return self.kind is Kind.TENSOR

    @property
    def is_bool_tensor(self) -> bool:
        return self.kind is Kind.TENSOR and self.dtype == "bool"

    @property
    def not_tensor(self) -> bool:
        return self.kind in NOT_TENSOR_KINDS

    @property
    def maybe_tensor(self) -> bool:
        """TENSOR, BATCH or UNKNOWN: worth reporting for tensor-only methods like `.item()`."""
        return self.kind in (Kind.TENSOR, Kind.BATCH, Kind.UNKNOWN)

    def with_device(self, device: str | None) -> Value:
        if device == self.device:
            return self
        if self.kind is Kind.BATCH and self.ref is not None:  # moved: no longer the batch a marker names
            return replace(self, device=device, ref=None)
        return replace(self, device=device)


UNKNOWN = Value(Kind.UNKNOWN)
# `ref` of an unknown value that stands for a parameter of the function being summarized
# ("$<function>:<index>:<name>", see `summaries`), and of an element of one ("*$..."): what a
# function returns or yields in terms of its parameters.
PARAM_REF = "$"
ELEMENT_REF = "*"
# `ref` of the tensor a module call returns: it may be a model-output object (`out.logits`).
MODULE_OUTPUT = "<module output>"
_MAYBE_PYTHON = "<maybe python>"
UNKNOWN_MAYBE_PYTHON = Value(Kind.UNKNOWN, ref=_MAYBE_PYTHON)  # unknown, one path a Python value
PYTHON = Value(Kind.PYTHON)
EMPTY_DICT = Value(Kind.PYTHON, items=())  # `{}`: what is stored into it becomes its `elem`
# An element of `optimizer.param_groups`: a dict of Python settings (`group["lr"]`) and the
# parameters (`group["params"]`)
PARAM_GROUP = Value(Kind.PYTHON, ref="<param group>")
# A `torch.distributions` object: what its methods give (`sample()`, `log_prob(a)`) lives where
# its parameters do (`device`)
DISTRIBUTION = Value(Kind.OBJECT, ref="<distribution>")
# One whose `sample()` calls `torch.normal` with its tensor parameters (`Normal`, `LogNormal`,
# `HalfNormal`, and `Independent` / `TransformedDistribution` over one): a tensor `std`, which
# PyTorch checks on the host
NORMAL_DISTRIBUTION = Value(Kind.OBJECT, ref="<normal distribution>")
_DISTRIBUTION_REFS = frozenset({DISTRIBUTION.ref, NORMAL_DISTRIBUTION.ref})
NONE = Value(Kind.NONE)
TENSOR = Value(Kind.TENSOR)
BOOL_TENSOR = Value(Kind.TENSOR, dtype="bool")
INT_TENSOR = Value(Kind.TENSOR, dtype="int")
FLOAT_TENSOR = Value(Kind.TENSOR, dtype="float")
SCALAR_TENSOR = Value(Kind.TENSOR, zero_dim=True)
MODULE = Value(Kind.MODULE)
LOSS_MODULE = Value(Kind.MODULE, loss=True)


def is_distribution(value: Value) -> bool:
    """A `torch.distributions` object (see DISTRIBUTION)."""
    return value.kind is Kind.OBJECT and value.ref in _DISTRIBUTION_REFS


def module_output(loss: bool = False) -> Value:
    """What calling a module gives: a tensor (0-dim for a loss), or an attribute bag of them."""
    return Value(Kind.TENSOR, zero_dim=loss, ref=MODULE_OUTPUT)
# `ref` of a DEVICE read from a tensor (`x.device`): it is wherever that tensor is, which a
# device chosen by the program (`device = torch.device(...)`, a `device` argument) is not.
TENSOR_DEVICE = "<tensor device>"


def device_of_tensor(tensor: Value) -> Value:
    """What `tensor.device` holds: the tensor's own device, unknown when the tensor's is."""
    return Value(Kind.DEVICE, device=tensor.device, ref=TENSOR_DEVICE)


BATCH = Value(Kind.BATCH)  # a tensor, or a tuple / dict of them: unpacking gives batches again
LOADER = Value(Kind.LOADER, elem=Value(Kind.BATCH, data=True))
NDARRAY = Value(Kind.NDARRAY)
CHECKED_NDARRAY = Value(Kind.NDARRAY, data=True)  # `if isinstance(v, np.ndarray):` v of unknown origin
DEVICE = Value(Kind.DEVICE)
DTYPE = Value(Kind.DTYPE)
OPTIMIZER = Value(Kind.OPTIMIZER)
TENSORS = Value(Kind.SEQ, elem=TENSOR)


def seq_of(elem: Value) -> Value:
    return Value(Kind.SEQ, elem=elem)


def tuple_of(items: tuple[Value, ...]) -> Value:
    elem = items[0] if items else UNKNOWN
    for item in items[1:]:
        elem = join(elem, item)
    return Value(Kind.SEQ, elem=elem, items=items)


def ref(qualname: str) -> Value:
    return Value(Kind.REF, ref=qualname)


def _join_opt(a: Value | None, b: Value | None) -> Value | None:
    if a is None or b is None:
        return None
    return join(a, b)


def join(a: Value, b: Value) -> Value:
    """Least upper bound: what a variable holds when either value may reach it."""
    if a is b or a == b:
        return a
    if a.kind is Kind.NONE:
        return b
    if b.kind is Kind.NONE:
        return a
    if a.kind is not b.kind:
        if a.not_tensor and b.not_tensor:
            return PYTHON
        kinds = {a.kind, b.kind}
        # A tensor on one path and "no idea" on the other is most likely a tensor (an
        # Optional[Tensor] parameter re-read from a dict, say) -- unless the unknown side
        # may itself be a Python value (`n if n is not None else cfg.n`).
        if kinds == {Kind.TENSOR, Kind.UNKNOWN}:
            tensor, unknown = (a, b) if a.kind is Kind.TENSOR else (b, a)
            if unknown.ref == _MAYBE_PYTHON:
                return UNKNOWN_MAYBE_PYTHON
            return Value(Kind.TENSOR, device=tensor.device)
        if kinds <= {Kind.TENSOR, Kind.BATCH, Kind.SEQ} and _tensor_data(a) and _tensor_data(b):
            # `inputs` a list of tensors on one path, one tensor on the other (moved the
            # same way on both): a batch, on the device both agree on
            devices = {_device_of(a), _device_of(b)}
            return Value(Kind.BATCH, device=devices.pop() if len(devices) == 1 else None,
                         data=a.data or b.data)
        if Kind.UNKNOWN in kinds and (a.not_tensor or b.not_tensor):
            for instance, other in ((a, b), (b, a)):
                if instance.kind is Kind.UNKNOWN and (instance.ref or "").startswith("@") and other.not_tensor:
                    return instance  # `mem = load_memory(path)` (a pickle) or `ReplayMemory(args)`: that object
            return UNKNOWN_MAYBE_PYTHON
        return UNKNOWN
    if a.kind is Kind.REF and a.ref and b.ref:
        # `torch.cuda.FloatTensor if cuda else torch.FloatTensor`: the accelerator's, as for a device
        for cuda, cuda_ref, host_ref in ((a, a.ref, b.ref), (b, b.ref, a.ref)):
            if cuda_ref.startswith("torch.cuda.") and host_ref in (cuda_ref.replace("torch.cuda.", "torch.", 1),
                                                                   "torch.Tensor"):
                return cuda
        if a.ref.rpartition(".")[2] == b.ref.rpartition(".")[2] and a.ref[:1] != "." and b.ref[:1] != ".":
            # `if opt.ff: from nerf.network_ff import NeRFNetwork` ... `else: from nerf.network
            # import NeRFNetwork`: one class by several implementations; the plainest module's
            # (the shortest name) is usually the default one
            return min(a, b, key=lambda v: (len(v.ref or ""), v.ref or ""))
        if _project_name(a.ref) and _project_name(b.ref):
            # `from train.train_sp import train_epoch_dense as train_epoch` on one branch, the
            # `..._sparse` one on the other (benchmarking-gnns): either function runs
            choice = _choice(a.ref, b.ref)
            return Value(Kind.REF, ref=choice) if choice is not None else Value(Kind.REF)
    if a.kind is Kind.FUNC and a.ref and b.ref:
        return Value(Kind.FUNC, ref=_choice(a.ref, b.ref))
    items = None
    if a.items is not None and b.items is not None and len(a.items) == len(b.items):
        items = tuple(join(x, y) for x, y in zip(a.items, b.items))
    if a.kind is Kind.UNKNOWN:
        if _MAYBE_PYTHON in (a.ref, b.ref):
            other_ref = b.ref if a.ref == _MAYBE_PYTHON else a.ref
            if other_ref is not None and other_ref.startswith("@"):
                return a if a.ref == other_ref else b  # (as above, the pickle's kind unknown)
            return UNKNOWN_MAYBE_PYTHON
        wrapped = _wrapped_instance(a, b)
        return Value(Kind.UNKNOWN, ref=wrapped) if wrapped is not None else UNKNOWN
    elem = _join_opt(a.elem, b.elem)
    if a.kind in (Kind.SEQ, Kind.PYTHON) and elem is None:
        # `[]` before a loop that appends (`{}` before one that stores): what was added
        elem = b.elem if a.items == () else a.elem if b.items == () else None
    return Value(
        a.kind,
        dtype=a.dtype if a.dtype == b.dtype else None,
        zero_dim=a.zero_dim and b.zero_dim,
        has_dims=a.has_dims and b.has_dims,
        elem=elem,
        items=items,
        ref=a.ref if a.ref == b.ref else _wrapped_instance(a, b),
        loss=a.loss and b.loss,
        device=a.device if a.device == b.device else None,
        data=a.data and b.data,
        origin=a.origin if a.origin is b.origin else _same_loader(a, b),
    )


FUNC_CHOICE = "|"  # FUNC `ref` of one of several functions: "Renderer.run|Renderer.run_cuda"
_MAX_CHOICES = 4


def _choice(a: str, b: str) -> str | None:
    """Either of a few: functions (`_run = self.run_cuda if self.cuda_ray else self.run`) or
    instances of project classes (`policy = TD3(...)` on one branch, `DDPG(...)` on another:
    "@TD3.TD3|@DDPG.DDPG", whose methods all run)."""
    names = sorted(set(a.split(FUNC_CHOICE)) | set(b.split(FUNC_CHOICE)))
    return FUNC_CHOICE.join(names) if len(names) <= _MAX_CHOICES else None


def _project_name(ref: str) -> bool:
    """A dotted name that may be a project function's (not torch's, not relative)."""
    return "." in ref and not ref.startswith((".", "torch.", "builtins.", "numpy.", "math."))


def _wrapped_instance(a: Value, b: Value) -> str | None:
    """`model = Tacotron2(h).cuda()`, then `if distributed: model = apply_gradient_allreduce(model)`
    (or `torch.compile(model)`), whose result says nothing: still an instance of the project's
    class ("@module.Class"), whose methods are the ones called."""
    if a.kind not in (Kind.MODULE, Kind.UNKNOWN):
        return None
    known = a.ref if b.ref is None else b.ref if a.ref is None else None
    if known is None and a.ref and b.ref and a.ref.startswith("@") and b.ref.startswith("@"):
        return _choice(a.ref, b.ref)
    return known if known is not None and known.startswith("@") else None


def instance_choices(value: Value) -> list[Value]:
    """The instances an instance choice stands for (each with one class), else [value]."""
    ref = value.ref
    if ref is None or FUNC_CHOICE not in ref or not ref.startswith("@"):
        return [value]
    return [replace(value, ref=one) for one in ref.split(FUNC_CHOICE)]


# The DataLoader arguments the input-pipeline rules and the loader summaries read.
_LOADER_SETTINGS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "collate_fn")


def _same_loader(a: Value, b: Value) -> object:
    """`loader = DataLoader(ds, shuffle=False, num_workers=1)` on one branch and `... shuffle=True
    ...` on the other (guided-diffusion's `load_data`): the first stands for both when they
    agree on every setting the rules read (positionally given settings and `**` make it no)."""
    if a.kind not in (Kind.LOADER, Kind.BATCH) or not isinstance(a.origin, ast.Call) \
            or not isinstance(b.origin, ast.Call):
        return None  # (a batch's origin is its loader's call)
    return a.origin if same_loader_settings(a.origin, b.origin) else None


def same_loader_settings(x: ast.Call, y: ast.Call) -> bool:
    """Two `DataLoader(...)` calls of one function that differ at most in what no rule reads."""
    if ast.dump(x.func) != ast.dump(y.func) or len(x.args) > 1 or len(y.args) > 1:
        return False
    # the dataset too: whether its items are tensors in memory, or Python values, is a setting;
    # of a collate function, only whether there is one (benchmarking-gnns' dense and sparse
    # loaders collate differently, with the same workers and pinning)
    settings = [{k.arg: _setting(k) for k in call.keywords
                 if k.arg is None or k.arg in _LOADER_SETTINGS or k.arg == "dataset"}
                | {"dataset": ast.dump(a) for a in call.args} for call in (x, y)]
    return settings[0] == settings[1] and None not in settings[0]


def _setting(keyword: ast.keyword) -> str:
    value = keyword.value
    if keyword.arg == "collate_fn" and not (isinstance(value, ast.Constant) and value.value is None):
        return "a collate function"
    return ast.dump(value)


def _tensor_data(value: Value) -> bool:
    """A tensor, a batch, or a list of tensors (known by their element)."""
    if value.kind is Kind.SEQ:
        return value.items is None and value.elem is not None and value.elem.kind in (Kind.TENSOR, Kind.BATCH)
    return value.kind in (Kind.TENSOR, Kind.BATCH)


def _device_of(value: Value) -> str | None:
    return value.elem.device if value.kind is Kind.SEQ and value.elem is not None else value.device


def element_of(value: Value) -> Value:
    """What `for x in value` binds to x."""
    kind = value.kind
    if kind is Kind.TENSOR:
        return Value(Kind.TENSOR, dtype=value.dtype, device=value.device)
    if kind is Kind.BATCH:
        return value
    if kind in (Kind.SEQ, Kind.LOADER):
        return value.elem or UNKNOWN
    if kind is Kind.MODULE:  # iterating an nn.Sequential / ModuleList yields modules
        return MODULE
    if kind is Kind.NDARRAY:
        return NDARRAY
    if kind is Kind.UNKNOWN and value.ref is not None and value.ref.startswith(PARAM_REF):
        return Value(Kind.UNKNOWN, ref=ELEMENT_REF + value.ref)  # `for obj in iterable: yield obj`
    return UNKNOWN


def item_of(value: Value, index: int) -> Value:
    """What `a, b = value` binds to position `index`."""
    if value.kind is Kind.TENSOR and value.zero_dim:
        # A 0-dim tensor has no items: what is unpacked or indexed by position was a tuple
        # after all (`loss, sample_size, logs = criterion(model, sample)`): the loss
        # first, then values nothing says are tensors.
        return value if index == 0 else UNKNOWN
    if value.kind is Kind.SEQ and value.items is not None:
        if -len(value.items) <= index < len(value.items):
            return value.items[index]
        return UNKNOWN
    return element_of(value)

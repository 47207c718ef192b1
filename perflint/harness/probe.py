"""Count host-device synchronisations while PyTorch code runs, on any build (CPU-only too).

    import torch
    from perflint.harness.probe import SyncProbe

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with SyncProbe(accelerator=device) as probe:   # simulates an accelerator on a CPU build
        loss = train_step(batch.to(device))
        print(loss.item())
    for event in probe.events:
        print(event.location, event.layer, event.op, event.reason)
    probe.count                   # syncs seen (an event may stand for several)

Three layers see different things (`docs` of `sync-catalog.md` §3):

* **function layer** (a `TorchFunctionMode`): Python-level torch calls. It is the only layer
  that sees `print(t)` / `repr` / `format` (the printer disables dispatch modes), `tolist`,
  `numpy`, `.cpu()`, `.to(...)`, `.cuda()` (no aten op on the CPU build), and
  `torch.tensor([t0, t1])` (the Python dispatch key is excluded while the list is read). It
  also claims `item`, `bool(t)`, `float(t)`, `int(t)`, `operator.index(t)`: the scalar read
  inside them is then not counted a second time by the dispatch layer.
* **dispatch layer** (a `TorchDispatchMode`): aten ops with argument-aware rules, for the
  syncs that happen inside an op: `nonzero`, boolean-mask `index` / `index_put_`, `unique`,
  `masked_select`, `repeat_interleave` without `output_size`, `bincount`, `histc` without a
  range, `equal`, `allclose`, linalg error checks, `normal` with a tensor std,
  `masked_fill` with a device tensor value, blocking `copy_`, host index tensors of an
  accelerator tensor (copied to its device before `index` / `index_put_`), and every other scalar read
  (`_local_scalar_dense`: `x[t0]`, `v in t`, `max(t0, t1)`, ...). See `DISPATCH_RULES`.
* **patches**: `torch.cuda.synchronize`, `torch.cuda.empty_cache`, `Stream.synchronize`,
  `Event.synchronize` and `torch.accelerator.synchronize` are replaced while the probe is
  active, since they are not torch functions and no mode sees them. On a build without CUDA
  the replacements only record the call.

On a build without CUDA a simulating probe also stands in for what such a build cannot run,
so that code written for a GPU runs: `.cuda()` and `.pin_memory()` return host copies, and
`torch.cuda.Event`/`Stream`/`current_stream`/`stream` become stand-ins whose
`synchronize()` is recorded.

**Where tensors live.** With real accelerator tensors (`simulate=False`, the default when
CUDA is available) an op syncs only when its tensor is on the accelerator, as on the GPU.
On a CPU build (`simulate=True`) every tensor is on the CPU, so the probe *tracks* which
tensors would be on the accelerator in the same program run on a GPU: tensors created with
an accelerator `device=` argument (the `accelerator` object given to the probe, a non-CPU
device, or a `t.device` read from such a tensor), results of `.to(accelerator)` / `.cuda()`,
`nn.Parameter`s, and anything computed from such tensors. Everything else (DataLoader
batches, `torch.tensor(data)`, `.cpu()` results, numpy imports) is on the host. Where a GPU
run would copy across devices but the CPU build returns the same object (`t.cpu()` of a
CPU tensor), the simulating probe returns a copy, so that each object has one home.

Each event records the first frame outside torch, the Python standard library and this
package (`SyncEvent.filename` / `lineno` / `source`). Only one probe may be active at a time
(the patches are global); the modes are per thread.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
import sysconfig
import threading
import weakref
from collections import Counter
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable, Iterator, Sequence

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["SyncEvent", "SyncProbe", "count_syncs", "DISPATCH_RULES", "FUNCTION_RULES"]

FUNCTION, DISPATCH, PATCH = "function", "dispatch", "patch"

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_HARNESS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_DIRS = tuple(
    {os.path.join(p, "") for p in (sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")) if p}
)
_MASK_DTYPES = (torch.bool, torch.uint8)


@dataclass(frozen=True)
class SyncEvent:
    """One place where the host waits for the device.

    `layer` is "function", "dispatch" or "patch"; `op` names what was called
    (`Tensor.item`, `aten.nonzero.default`, `torch.cuda.synchronize`); `reason` says why it
    syncs; `count` is how many syncs the call performs (`torch.tensor([t0, t1])`: 2).
    `filename`/`lineno`/`function`/`source` are the first frame outside torch, the standard
    library and perflint's harness (None when there is none).
    """

    layer: str
    op: str
    reason: str
    filename: str | None
    lineno: int | None
    function: str | None
    source: str
    count: int = 1

    @property
    def location(self) -> str:
        return f"{self.filename}:{self.lineno}" if self.filename else "<unknown>"

    def to_json(self) -> dict[str, Any]:
        return {
            "layer": self.layer, "op": self.op, "reason": self.reason, "count": self.count,
            "file": self.filename, "line": self.lineno, "function": self.function, "source": self.source,
        }


# ----------------------------------------------------------------------------- helpers
def _tensors(values: Any) -> Iterator[torch.Tensor]:
    """Tensors in an argument list: top level, and one level into lists/tuples/dicts."""
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, torch.Tensor):
                    yield item
        elif isinstance(value, dict):
            for item in value.values():
                if isinstance(item, torch.Tensor):
                    yield item


def _nested_tensors(data: Any, limit: int = 100_000) -> list[torch.Tensor]:
    """Tensors anywhere inside nested lists/tuples (the data of `torch.tensor(...)`)."""
    found: list[torch.Tensor] = []
    stack = [data]
    seen = 0
    while stack and seen < limit:
        item = stack.pop()
        seen += 1
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


def _arg(args: Sequence[Any], kwargs: dict[str, Any], index: int, name: str, default: Any = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[index] if len(args) > index else default


def _function_name(func: Any) -> str:
    """A stable name for a torch function: `Tensor.item`, `torch.tensor`, `torch.nn.functional.one_hot`."""
    qualname = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    if qualname == "getset_descriptor.__get__":
        owner = getattr(func, "__self__", None)
        return f"Tensor.{getattr(owner, '__name__', '?')}.__get__"
    head, _, tail = qualname.partition(".")
    if head in ("TensorBase", "Tensor") and tail:
        return f"Tensor.{tail}"
    if head == "_VariableFunctionsClass" and tail:
        return f"torch.{tail}"
    module = getattr(func, "__module__", None) or ""
    if module == "torch._C._nn":
        return f"torch.nn.functional.{qualname}"
    if module == "torch._C._linalg":
        return f"torch.linalg.{qualname.removeprefix('linalg_')}"
    if module:
        return f"{module}.{qualname}"
    return qualname


class _Tags:
    """Per-object "would this tensor live on the accelerator?" marks, without keeping tensors alive.

    Keyed by `id()`; a weak reference checks that the id still names the same object and
    removes the entry when the tensor dies. (A WeakKeyDictionary would compare tensors with
    `==`, which is elementwise.)
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, bool]] = {}

    def set(self, tensor: torch.Tensor, on_accelerator: bool) -> None:
        key = id(tensor)
        entries = self._entries

        def forget(ref: weakref.ref, key: int = key) -> None:
            entry = entries.get(key)
            if entry is not None and entry[0] is ref:
                del entries[key]

        try:
            entries[key] = (weakref.ref(tensor, forget), on_accelerator)
        except TypeError:  # not weak-referenceable: do not track
            pass

    def get(self, tensor: torch.Tensor) -> bool | None:
        entry = self._entries.get(id(tensor))
        if entry is not None and entry[0]() is tensor:
            return entry[1]
        return None

    def clear(self) -> None:
        self._entries.clear()


# ----------------------------------------------------------------------------- the probe
_active_lock = threading.Lock()
_active: list["SyncProbe"] = []


class SyncProbe:
    """Record the host-device syncs performed by the code run inside `with probe:`.

    Parameters:
        simulate: treat the CPU build as a stand-in for an accelerator (see the module
            docs). Default: True when CUDA is not available.
        accelerator: in simulate mode, the object that stands for the accelerator device
            (for example the `device` a benchmark or training script passes around), matched
            by identity. Non-CPU devices ("cuda", "cuda:0", `torch.device("mps")`) always
            count as the accelerator.
        cpu_means_accelerator: in simulate mode, treat every CPU device argument as the
            accelerator (for code written `device = "cuda" if ... else "cpu"` run on a CPU
            machine); then only `.cpu()`, `.numpy()`, `.tolist()`, `.item()`... read to the host.
        ignore_paths: more path prefixes to skip when attributing an event to a frame.

    Attributes: `events` (list of `SyncEvent`), `count` (total syncs). `reset()` clears
    the events; `uncounted()` runs code without recording (tracking continues); `mark()`
    tells the simulating probe where a tensor lives.
    """

    def __init__(
        self,
        simulate: bool | None = None,
        accelerator: Any = None,
        *,
        cpu_means_accelerator: bool = False,
        ignore_paths: Sequence[str] = (),
    ) -> None:
        self.simulate = (not torch.cuda.is_available()) if simulate is None else simulate
        self.accelerator = accelerator
        self.cpu_means_accelerator = cpu_means_accelerator
        self.ignore_paths = tuple(ignore_paths)
        self.events: list[SyncEvent] = []
        self._tags = _Tags()
        self._accel_devices: dict[int, Any] = {}  # device objects read from accelerator tensors
        self._absorb = 0  # >0 while a function-layer call that already counted its sync runs
        self._recording = True
        self._call_on_accel: list[bool] = []
        self._modes: list[Any] = []
        self._patches: list[tuple[Any, str, Any]] = []

    # ------------------------------------------------------------------ public API
    @property
    def count(self) -> int:
        return sum(event.count for event in self.events)

    def reset(self) -> None:
        """Forget the events recorded so far (where tensors live is still tracked)."""
        self.events.clear()

    def by_op(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for event in self.events:
            counts[event.op] += event.count
        return counts

    def by_location(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for event in self.events:
            counts[event.location] += event.count
        return counts

    @contextlib.contextmanager
    def uncounted(self) -> Iterator[None]:
        """Run code without recording syncs; the simulated placement of tensors is still tracked."""
        previous, self._recording = self._recording, False
        try:
            yield
        finally:
            self._recording = previous

    def mark(self, tensor: torch.Tensor, on_accelerator: bool = True) -> None:
        """Tell a simulating probe that `tensor` lives on the accelerator (or on the host)."""
        self._tags.set(tensor, on_accelerator)

    def on_accelerator(self, tensor: torch.Tensor) -> bool:
        """Would `tensor` live on the accelerator (simulate) / does it (real devices)?"""
        if not self.simulate:
            return tensor.device.type not in ("cpu", "meta")
        tag = self._tags.get(tensor)
        if tag is not None:
            return tag
        return isinstance(tensor, torch.nn.Parameter)

    def __enter__(self) -> "SyncProbe":
        with _active_lock:
            if _active:
                raise RuntimeError("another SyncProbe is already active")
            _active.append(self)
        try:
            self._install_patches()
            function_mode, dispatch_mode = _FunctionLayer(self), _DispatchLayer(self)
            function_mode.__enter__()
            try:
                dispatch_mode.__enter__()
            except BaseException:
                function_mode.__exit__(None, None, None)
                raise
            self._modes = [function_mode, dispatch_mode]
        except BaseException:
            self._remove_patches()
            with _active_lock:
                _active.remove(self)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            function_mode, dispatch_mode = self._modes
            dispatch_mode.__exit__(None, None, None)
            function_mode.__exit__(None, None, None)
            self._modes = []
        finally:
            self._remove_patches()
            with _active_lock:
                if self in _active:
                    _active.remove(self)

    # ------------------------------------------------------------------ recording
    def _user_frame(self) -> tuple[str | None, int | None, str | None, str]:
        frame: FrameType | None = sys._getframe(1)
        skip = (_TORCH_DIR, _HARNESS_DIR) + _STDLIB_DIRS + self.ignore_paths
        while frame is not None:
            filename = frame.f_code.co_filename
            if not (filename.startswith(skip) or filename.startswith("<frozen")):
                source = linecache.getline(filename, frame.f_lineno).strip()
                return filename, frame.f_lineno, frame.f_code.co_name, source
            frame = frame.f_back
        return None, None, None, ""

    def _record(self, layer: str, op: str, reason: str, count: int = 1) -> None:
        if not self._recording or count <= 0:
            return
        filename, lineno, function, source = self._user_frame()
        self.events.append(SyncEvent(layer, op, reason, filename, lineno, function, source, count))

    # ------------------------------------------------------------------ devices
    def _device_is_accelerator(self, device: Any) -> bool | None:
        """True/False for a device argument; None when there is none (or it is `meta`)."""
        if device is None:
            return None
        if isinstance(device, torch.Tensor):
            return self.on_accelerator(device)
        if self.simulate:
            if self.accelerator is not None and device is self.accelerator:
                return True
            remembered = self._accel_devices.get(id(device))
            if remembered is not None and remembered is device:
                return True
        try:
            parsed = torch.device(device) if not isinstance(device, torch.device) else device
        except (RuntimeError, TypeError, ValueError):
            return None
        if parsed.type == "meta":
            return None
        if parsed.type == "cpu":
            return bool(self.simulate and self.cpu_means_accelerator)
        return True

    def _remember_accelerator_device(self, device: Any) -> None:
        if len(self._accel_devices) > 4096:
            self._accel_devices.clear()
        self._accel_devices[id(device)] = device

    def _place(self, result: Any, source: torch.Tensor | None, on_accelerator: bool) -> Any:
        """Record where a transfer's result lives; in simulate mode never alias the source."""
        if not self.simulate or not isinstance(result, torch.Tensor):
            return result
        if source is not None and result is source and self.on_accelerator(source) != on_accelerator:
            with torch._C.DisableTorchFunction():
                result = result.clone()
        self._tags.set(result, on_accelerator)
        return result

    # ------------------------------------------------------------------ patches
    def _install_patches(self) -> None:
        real_cuda = torch.cuda.is_available()

        def wrap(owner: Any, name: str, op: str, reason: str) -> None:
            original = getattr(owner, name, None)
            if original is None:
                return
            probe = self

            def patched(*args: Any, **kwargs: Any) -> Any:
                probe._record(PATCH, op, reason)
                if real_cuda:
                    return original(*args, **kwargs)
                return None

            patched.__wrapped__ = original  # type: ignore[attr-defined]
            self._patches.append((owner, name, original))
            setattr(owner, name, patched)

        wait = "waits for all queued work on the device"
        wrap(torch.cuda, "synchronize", "torch.cuda.synchronize", f"explicit device synchronize: {wait}")
        wrap(torch.cuda, "empty_cache", "torch.cuda.empty_cache",
             "empty_cache synchronizes before releasing cached blocks (cudaFree)")
        memory = getattr(torch.cuda, "memory", None)
        if memory is not None and getattr(memory, "empty_cache", None) is not None:
            wrap(memory, "empty_cache", "torch.cuda.empty_cache",
                 "empty_cache synchronizes before releasing cached blocks (cudaFree)")
        wrap(torch.cuda.Stream, "synchronize", "torch.cuda.Stream.synchronize",
             f"stream synchronize: {wait} on the stream")
        wrap(torch.cuda.Event, "synchronize", "torch.cuda.Event.synchronize",
             "event synchronize: waits until the event completes")
        accelerator = getattr(torch, "accelerator", None)
        if accelerator is not None:
            wrap(accelerator, "synchronize", "torch.accelerator.synchronize", f"explicit device synchronize: {wait}")
        if self.simulate and not real_cuda:
            self._install_stand_ins()

    def _install_stand_ins(self) -> None:
        """On a build without CUDA, let code written for CUDA streams and events run (simulate mode).

        `torch.cuda.Event`, `Stream`, `current_stream`, `default_stream` and `stream` become
        stand-ins that do nothing except record their `synchronize()` calls.
        """
        events, streams = _stand_in_classes(self)
        replacements = {
            "Event": events, "Stream": streams,
            "current_stream": lambda device=None: streams(),
            "default_stream": lambda device=None: streams(),
            "stream": lambda stream=None: contextlib.nullcontext(stream),
        }
        for name, value in replacements.items():
            self._patches.append((torch.cuda, name, getattr(torch.cuda, name)))
            setattr(torch.cuda, name, value)

    def _remove_patches(self) -> None:
        while self._patches:
            owner, name, original = self._patches.pop()
            setattr(owner, name, original)


def _stand_in_classes(probe: SyncProbe) -> tuple[type, type]:
    class Event:
        """Stand-in for `torch.cuda.Event` while a simulating probe runs on a build without CUDA."""

        def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                     **_: Any) -> None:
            self.enable_timing = enable_timing

        def record(self, stream: Any = None) -> None:
            return None

        def wait(self, stream: Any = None) -> None:
            return None

        def query(self) -> bool:
            return True

        def elapsed_time(self, end_event: Any) -> float:
            return 0.0

        def synchronize(self) -> None:
            probe._record(PATCH, "torch.cuda.Event.synchronize", "event synchronize: waits until the event completes")

    class Stream:
        """Stand-in for `torch.cuda.Stream` while a simulating probe runs on a build without CUDA."""

        def __init__(self, device: Any = None, priority: int = 0, **_: Any) -> None:
            self.device = device

        def wait_event(self, event: Any) -> None:
            return None

        def wait_stream(self, stream: Any) -> None:
            return None

        def record_event(self, event: Any = None) -> Any:
            return event if event is not None else Event()

        def query(self) -> bool:
            return True

        def synchronize(self) -> None:
            probe._record(PATCH, "torch.cuda.Stream.synchronize",
                          "stream synchronize: waits for all queued work on the device on the stream")

        def __enter__(self) -> "Stream":
            return self

        def __exit__(self, *exc: Any) -> None:
            return None

    return Event, Stream


# ----------------------------------------------------------------------------- function layer
# A function-layer rule runs the call itself: (probe, func, args, kwargs, name) -> result.
FunctionRule = Callable[[SyncProbe, Any, tuple, dict, str], Any]
FUNCTION_RULES: dict[str, FunctionRule] = {}


def _function_rule(*names: str) -> Callable[[FunctionRule], FunctionRule]:
    def register(rule: FunctionRule) -> FunctionRule:
        for name in names:
            FUNCTION_RULES[name] = rule
        return rule

    return register


def _claim(probe: SyncProbe, func: Any, args: tuple, kwargs: dict, op: str, reason: str | None,
           count: int = 1) -> Any:
    """Run a function-layer call; when it syncs, record it and absorb the aten-level read inside."""
    if reason:
        probe._record(FUNCTION, op, reason, count)
    probe._absorb += 1
    try:
        return func(*args, **kwargs)
    finally:
        probe._absorb -= 1


_SCALAR_READS = {
    "Tensor.item": "`.item()` copies the value to the host",
    "Tensor.__bool__": "`bool(t)` / `if t:` copies the value to the host",
    "Tensor.__float__": "`float(t)` copies the value to the host",
    "Tensor.__int__": "`int(t)` copies the value to the host",
    "Tensor.__index__": "using a tensor as an index/int (`range(t)`, `lst[t]`) copies it to the host",
    "Tensor.__complex__": "`complex(t)` copies the value to the host",
    "Tensor.is_nonzero": "`is_nonzero()` copies the value to the host",
    "Tensor.tolist": "`.tolist()` copies the tensor to the host (blocking)",
    "Tensor.numpy": "`.numpy()` copies the tensor to the host (blocking)",
    "Tensor.__array__": "`np.asarray(t)` copies the tensor to the host (blocking)",
    "Tensor.__repr__": "printing a tensor copies its values to the host",
    "Tensor.__str__": "printing a tensor copies its values to the host",
}


@_function_rule(*_SCALAR_READS)
def _scalar_read(probe: SyncProbe, func: Any, args: tuple, kwargs: dict, name: str = "") -> Any:
    source = args[0] if args and isinstance(args[0], torch.Tensor) else None
    syncs = source is not None and probe.on_accelerator(source)
    return _claim(probe, func, args, kwargs, name, _SCALAR_READS[name] if syncs else None)


@_function_rule("Tensor.__format__")
def _format(probe: SyncProbe, func: Any, args: tuple, kwargs: dict, name: str = "") -> Any:
    source = args[0] if args and isinstance(args[0], torch.Tensor) else None
    reason = None
    if source is not None and probe.on_accelerator(source):
        reason = ("formatting a 0-dim tensor reads it with `.item()`" if source.dim() == 0
                  else "formatting a tensor copies its values to the host")
    return _claim(probe, func, args, kwargs, name, reason)


@_function_rule("Tensor.cpu")
def _cpu(probe: SyncProbe, func: Any, args: tuple, kwargs: dict, name: str = "") -> Any:
    source = args[0]
    syncs = probe.on_accelerator(source)
    result = _claim(probe, func, args, kwargs, name, "`.cpu()` is a blocking device-to-host copy" if syncs else None)
    return probe._place(result, source, False)


def _to_target(args: tuple, kwargs: dict) -> tuple[Any, bool]:
    """The device (or tensor) `Tensor.to(...)` moves to, and its `non_blocking` flag."""
    rest = args[1:]
    target = kwargs.get("device")
    non_blocking = kwargs.get("non_blocking", False)
    if rest:
        first = rest[0]
        if isinstance(first, torch.dtype):
            if len(rest) > 1:
                non_blocking = kwargs.get("non_blocking", rest[1])
        elif isinstance(first, torch.Tensor):
            target = first
            if len(rest) > 1:
                non_blocking = kwargs.get("non_blocking", rest[1])
        else:
            target = first
            # to(device, dtype, non_blocking, copy)
            if len(rest) > 2:
                non_blocking = kwargs.get("non_blocking", rest[2])
    return target, bool(non_blocking)


def _transfer(probe: SyncProbe, func: Any, args: tuple, kwargs: dict, name: str,
              target_on_accelerator: bool | None, non_blocking: bool) -> Any:
    source = args[0]
    if target_on_accelerator is None:
        return _generic(probe, func, args, kwargs)
    source_on_accelerator = probe.on_accelerator(source)
    reason = None
    if source_on_accelerator != target_on_accelerator and not non_blocking:
        reason = ("blocking host-to-device copy (`non_blocking=False`)" if target_on_accelerator
                  else "blocking device-to-host copy")
    if name == "Tensor.cuda" and probe.simulate and not torch.cuda.is_available():
        # A CPU build cannot run `.cuda()`: the simulating probe stands the copy in.
        if reason:
            probe._record(FUNCTION, name, reason)
        with torch._C.DisableTorchFunction():
            result = source.clone() if not source_on_accelerator else source
    else:
        result = _claim(probe, func, args, kwargs, name, reason)
    return probe._place(result, source, target_on_accelerator)


_OVERRIDES_FILE = os.path.join(_TORCH_DIR, "overrides.py")


def _called_from_torch() -> bool:
    """Is the innermost frame outside this package (and torch's override plumbing) torch's own code?"""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (filename.startswith(_HARNESS_DIR) or filename == _OVERRIDES_FILE):
            return filename.startswith(_TORCH_DIR)
        frame = frame.f_back
    return False


@_function_rule("Tensor.to")
def _to(probe: SyncProbe, func: Any, args: tuple, kwargs: dict, name: str = "") -> Any:
    target, non_blocking = _to_target(args, kwargs)
    on_accelerator = probe._device_is_accelerator(target)
    if (probe.simulate and on_accelerator is False and isinstance(target, torch.device)
            and _called_from_torch()):
        # torch's own code moving a tensor to a device object it computed (`grad.device`,
        # a device grouping) means "where the tensor lives": on a CPU build that object
        # says "cpu" even for accelerator tensors, so it is not taken as the host.
        on_accelerator = probe.on_accelerator(args[0])
    return _transfer(probe, func, args, kwargs, name, on_accelerator, non_blocking)


@_function_rule("Tensor.cuda")
def _cuda(probe: SyncProbe, func: Any, args: tuple, kwargs: dict, name: str = "") -> Any:
    non_blocking = bool(_arg(args, kwargs, 2, "non_blocking", False))
    return _transfer(probe, func, args, kwargs, name, True, non_blocking)


@_function_rule("Tensor.pin_memory")
def _pin_memory(probe: SyncProbe, func: Any, args: tuple, kwargs: dict, name: str = "") -> Any:
    source = args[0]
    if probe.simulate and not torch.cuda.is_available():
        # A build without an accelerator cannot pin; the simulating probe stands a host copy in.
        with torch._C.DisableTorchFunction():
            result = source.clone()
    else:
        result = _generic(probe, func, args, kwargs)
    return probe._place(result, source, False)


@_function_rule("Tensor.device.__get__")
def _device_getter(probe: SyncProbe, func: Any, args: tuple, kwargs: dict, name: str = "") -> Any:
    result = func(*args, **kwargs)
    if probe.simulate and args and isinstance(args[0], torch.Tensor) and probe.on_accelerator(args[0]):
        probe._remember_accelerator_device(result)
    return result


@_function_rule("torch.tensor", "torch.as_tensor", "torch.asarray")
def _tensor_from_data(probe: SyncProbe, func: Any, args: tuple, kwargs: dict, name: str = "") -> Any:
    data = _arg(args, kwargs, 0, "obj" if name == "torch.asarray" else "data")
    target = probe._device_is_accelerator(kwargs.get("device"))
    if isinstance(data, torch.Tensor):
        source_on_accelerator = probe.on_accelerator(data)
        reason = None
        if target is not None and target != source_on_accelerator:
            reason = "blocking copy of the tensor to its new device"
        result = _claim(probe, func, args, kwargs, name, reason)
        return probe._place(result, data, source_on_accelerator if target is None else target)
    elements = [t for t in _nested_tensors(data) if probe.on_accelerator(t)]
    if elements:
        reason = f"`{name}([...])` reads each of {len(elements)} device tensors to the host, one sync each"
        result = _claim(probe, func, args, kwargs, name, reason, count=len(elements))
    elif target:
        result = _claim(probe, func, args, kwargs, name,
                        f"`{name}(data, device=...)` builds the tensor on the host, then copies it (blocking)")
    else:
        result = _claim(probe, func, args, kwargs, name, None)
    return probe._place(result, None, bool(target))


_FACTORIES = """zeros ones empty full rand randn randint randperm arange range linspace logspace eye
empty_strided from_numpy frombuffer zeros_like ones_like empty_like full_like rand_like randn_like
randint_like tril_indices triu_indices""".split()


@_function_rule(*(f"torch.{f}" for f in _FACTORIES))
def _factory(probe: SyncProbe, func: Any, args: tuple, kwargs: dict, name: str = "") -> Any:
    result = _generic(probe, func, args, kwargs)
    if probe.simulate and isinstance(result, torch.Tensor):
        target = probe._device_is_accelerator(kwargs.get("device"))
        if target is not None:
            probe._tags.set(result, target)
        elif not name.endswith("_like"):
            probe._tags.set(result, torch.get_default_device().type not in ("cpu", "meta"))
    return result


@_function_rule("torch.nn.functional.one_hot")
def _one_hot(probe: SyncProbe, func: Any, args: tuple, kwargs: dict, name: str = "") -> Any:
    source = args[0] if args and isinstance(args[0], torch.Tensor) else None
    num_classes = _arg(args, kwargs, 1, "num_classes", -1)
    reason = None
    if source is not None and probe.on_accelerator(source) and num_classes == -1:
        reason = "`one_hot` without `num_classes` reads `max()` to size its output"
    # With num_classes the CPU kernel still reads min/max for its checks; the CUDA kernel
    # does not (it relies on device asserts), so the read inside is absorbed, not counted.
    result = _claim(probe, func, args, kwargs, name, reason)
    if probe.simulate and source is not None and isinstance(result, torch.Tensor):
        probe._tags.set(result, probe.on_accelerator(source))
    return result


def _generic(probe: SyncProbe, func: Any, args: tuple, kwargs: dict) -> Any:
    if not probe.simulate:
        return func(*args, **kwargs)
    # Ops with no tensor inputs that run inside this call (factories in torch's own Python
    # code) are placed like the call's tensor arguments.
    on_accel = any(probe.on_accelerator(t) for t in _tensors(args)) or \
        any(probe.on_accelerator(t) for t in _tensors(kwargs.values()))
    probe._call_on_accel.append(on_accel)
    try:
        return func(*args, **kwargs)
    finally:
        probe._call_on_accel.pop()


class _FunctionLayer(TorchFunctionMode):
    def __init__(self, probe: SyncProbe) -> None:
        super().__init__()
        self.probe = probe
        self._names: dict[Any, str] = {}

    def _name(self, func: Any) -> str:
        try:
            name = self._names.get(func)
        except TypeError:
            return _function_name(func)
        if name is None:
            name = _function_name(func)
            if len(self._names) < 10_000:
                try:
                    self._names[func] = name
                except TypeError:
                    pass
        return name

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = self._name(func)
        rule = FUNCTION_RULES.get(name)
        if rule is None:
            return _generic(self.probe, func, args, kwargs)
        return rule(self.probe, func, args, kwargs, name)  # type: ignore[call-arg]


# ----------------------------------------------------------------------------- dispatch layer
DispatchRule = Callable[[SyncProbe, tuple, dict], "str | None"]
DISPATCH_RULES: dict[str, DispatchRule] = {}


def _dispatch_rule(*names: str) -> Callable[[DispatchRule], DispatchRule]:
    def register(rule: DispatchRule) -> DispatchRule:
        for name in names:
            DISPATCH_RULES[name] = rule
        return rule

    return register


def _first_on_accelerator(probe: SyncProbe, args: tuple) -> bool:
    return bool(args) and isinstance(args[0], torch.Tensor) and probe.on_accelerator(args[0])


def _simple(reason: str) -> DispatchRule:
    def rule(probe: SyncProbe, args: tuple, kwargs: dict) -> str | None:
        return reason if _first_on_accelerator(probe, args) else None

    return rule


for _names, _reason in (
    (("_local_scalar_dense",), "reads a tensor value to the host (item/float/int/bool/index/format)"),
    (("nonzero",), "the output size is the number of non-zeros, copied to the host"),
    (("_unique", "_unique2", "unique_dim", "unique_consecutive", "unique_dim_consecutive"),
     "the output size is the number of unique values, copied to the host"),
    (("masked_select",), "the output size is the number of selected elements, copied to the host"),
    (("bincount",), "bincount reads min() and max() to size its output"),
    (("equal",), "torch.equal reads the comparison result to the host"),
    (("allclose",), "allclose reads the comparison result to the host"),
    (("_linalg_check_errors",), "linalg error checking reads `info` to the host (the `_ex` variants do not)"),
    (("_linalg_eigh", "linalg_eig"), "eigen-decomposition checks convergence on the host"),
):
    for _name in _names:
        DISPATCH_RULES[_name] = _simple(_reason)


_HOST_INDEX = "a host index tensor is copied to the device (blocking) before indexing"


def _host_indices(probe: SyncProbe, indices: Sequence[Any]) -> list[torch.Tensor]:
    """Index tensors that live on the host: indexing an accelerator tensor copies each to its
    device first (`make_info` in ATen's TensorAdvancedIndexing.cpp: `indice.to(self.device())`)."""
    return [i for i in indices if isinstance(i, torch.Tensor) and not probe.on_accelerator(i)]


@_dispatch_rule("index")
def _index(probe: SyncProbe, args: tuple, kwargs: dict) -> str | None:
    indices = _arg(args, kwargs, 1, "indices", ()) or ()
    masks = [i for i in indices if isinstance(i, torch.Tensor) and i.dtype in _MASK_DTYPES]
    if any(probe.on_accelerator(m) for m in masks):
        return "boolean-mask indexing calls nonzero() to size the result"
    if _first_on_accelerator(probe, args) and _host_indices(probe, indices):
        return _HOST_INDEX  # a host mask too: nonzero() on the host, then the copy
    return None


@_dispatch_rule("index_put", "index_put_", "_index_put_impl", "_index_put_impl_")
def _index_put(probe: SyncProbe, args: tuple, kwargs: dict) -> str | None:
    if not _first_on_accelerator(probe, args):
        return None
    indices = [i for i in (_arg(args, kwargs, 1, "indices", ()) or ()) if i is not None]
    values = _arg(args, kwargs, 2, "values")
    accumulate = bool(_arg(args, kwargs, 3, "accumulate", False))
    host_value = isinstance(values, torch.Tensor) and not probe.on_accelerator(values)
    masks = [i for i in indices if isinstance(i, torch.Tensor) and i.dtype in _MASK_DTYPES]
    if any(probe.on_accelerator(m) for m in masks):
        # canDispatchToMaskedFill: one mask on self's device, one host value -> masked_fill_, no sync
        if (len(indices) == 1 and not accumulate and host_value and values.numel() == 1):
            return None
        return "writing through a boolean mask calls nonzero()"
    if host_value:
        return "an integer-index write of a host value copies it to the device (blocking, torch 2.13)"
    if _host_indices(probe, indices):
        return _HOST_INDEX
    return None


@_dispatch_rule("repeat_interleave")
def _repeat_interleave(probe: SyncProbe, args: tuple, kwargs: dict) -> str | None:
    repeats = args[0] if args else None
    if not isinstance(repeats, torch.Tensor) or not probe.on_accelerator(repeats):
        return None
    if kwargs.get("output_size") is None and (len(args) < 3 or args[2] is None):
        return "repeat_interleave with tensor repeats and no output_size reads the total to the host"
    return None


@_dispatch_rule("histc")
def _histc(probe: SyncProbe, args: tuple, kwargs: dict) -> str | None:
    low = _arg(args, kwargs, 2, "min", 0)
    high = _arg(args, kwargs, 3, "max", 0)
    if _first_on_accelerator(probe, args) and low == high:
        return "histc without a range reads min() and max() to the host"
    return None


@_dispatch_rule("normal")
def _normal(probe: SyncProbe, args: tuple, kwargs: dict) -> str | None:
    std = _arg(args, kwargs, 1, "std")
    if isinstance(std, torch.Tensor) and probe.on_accelerator(std):
        return "normal() with a tensor std checks std >= 0 on the host"
    return None


@_dispatch_rule("masked_fill", "masked_fill_")
def _masked_fill(probe: SyncProbe, args: tuple, kwargs: dict) -> str | None:
    value = _arg(args, kwargs, 2, "value")
    if isinstance(value, torch.Tensor) and probe.on_accelerator(value):
        return "masked_fill with a device tensor value reads it with item()"
    return None


@_dispatch_rule("_linalg_svd")
def _linalg_svd(probe: SyncProbe, args: tuple, kwargs: dict) -> str | None:
    compute_uv = _arg(args, kwargs, 2, "compute_uv", True)
    if _first_on_accelerator(probe, args) and not compute_uv:
        return "svdvals checks convergence on the host"
    return None


@_dispatch_rule("copy_")
def _copy(probe: SyncProbe, args: tuple, kwargs: dict) -> str | None:
    if len(args) < 2 or not isinstance(args[1], torch.Tensor):
        return None
    if bool(_arg(args, kwargs, 2, "non_blocking", False)):
        return None
    dst, src = probe.on_accelerator(args[0]), probe.on_accelerator(args[1])
    if dst and not src:
        return "blocking host-to-device copy_ (`non_blocking=False`)"
    if src and not dst:
        return "blocking device-to-host copy_"
    return None


# Ops whose result is a new tensor but that change no placement: the probe propagates
# "on the accelerator" from inputs to outputs for every op (simulate mode only).
class _DispatchLayer(TorchDispatchMode):
    def __init__(self, probe: SyncProbe) -> None:
        super().__init__()
        self.probe = probe

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        probe = self.probe
        rule = DISPATCH_RULES.get(func.overloadpacket.__name__)
        if rule is not None:
            with torch._C.DisableTorchFunction():
                reason = rule(probe, args, kwargs)
            if reason and not probe._absorb:
                probe._record(DISPATCH, str(func), reason)
        out = func(*args, **kwargs)
        if probe.simulate:
            with torch._C.DisableTorchFunction():
                self._propagate(func, args, kwargs, out)
        return out

    def _propagate(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        probe = self.probe
        inputs = list(_tensors(args)) + list(_tensors(kwargs.values()))
        if func.overloadpacket.__name__ in ("lift_fresh", "lift_fresh_copy"):
            on_accel = False  # Python data wrapped as a tensor: built on the host
        elif inputs:
            on_accel = any(probe.on_accelerator(t) for t in inputs)
        elif probe._call_on_accel:
            on_accel = probe._call_on_accel[-1]
        else:
            return
        input_ids = {id(t) for t in inputs}
        outputs = out if isinstance(out, (tuple, list)) else (out,)
        for tensor in outputs:
            # In-place results keep their own placement (an op never moves its output).
            if isinstance(tensor, torch.Tensor) and id(tensor) not in input_ids:
                probe._tags.set(tensor, on_accel)


# ----------------------------------------------------------------------------- convenience
def count_syncs(fn: Callable[..., Any], *args: Any, simulate: bool | None = None,
                accelerator: Any = None, **kwargs: Any) -> tuple[Any, list[SyncEvent]]:
    """Run `fn(*args, **kwargs)` under a fresh probe; return its result and the sync events."""
    with SyncProbe(simulate=simulate, accelerator=accelerator) as probe:
        result = fn(*args, **kwargs)
    return result, list(probe.events)

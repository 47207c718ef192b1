"""The probe `perflint trace` runs a program under (imports torch).

`TracingProbe` is the bench harness's `SyncProbe` (function layer, dispatch layer, patched
synchronize / empty_cache / stream and event syncs; on a CPU build, the simulated
accelerator) with three additions:

* attribution to the user's line: the first frame outside torch, perflint, the standard
  library and installed libraries (site-packages / dist-packages), or, with
  `include_libraries`, the first frame outside torch, perflint and the standard library;
* the optimizer-step interval each event happened in (for "every step" vs "once");
* the trace limits, checked at each event (`Stopper`).

`CudaSyncWarnings` adds the real-device layer on a CUDA machine:
`torch.cuda.set_sync_debug_mode("warn")` makes every synchronizing CUDA call emit a
warning; while it is active, those warnings are recorded as events (layer "cuda") at the
line that triggered them instead of being printed. Other warnings pass through.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import re
import site
import sys
import sysconfig
import threading
import warnings
from typing import Any, Iterator

import torch

from ..harness.probe import SyncProbe
from .limits import Stopper
from .sites import CUDA_LAYER, CUDA_OP, CUDA_REASON

SYNC_WARNING = "called a synchronizing CUDA operation"

_PERFLINT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_LIBRARY_MARKERS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")

INTERNAL, LIBRARY, USER = "internal", "library", "user"


def _library_dirs() -> tuple[str, ...]:
    dirs = set()
    try:
        dirs.update(site.getsitepackages())
    except AttributeError:  # some virtualenv builds
        pass
    user = getattr(site, "getusersitepackages", lambda: None)()
    if user:
        dirs.add(user)
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    return tuple(os.path.join(os.path.abspath(d), "") for d in dirs)


def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({os.path.join(os.path.abspath(p), "") for p in (paths.get("stdlib"), paths.get("platstdlib")) if p})


class FramePolicy:
    """Which frame an event belongs to: the user's code, a library, or tooling to look through."""

    def __init__(self, include_libraries: bool = False) -> None:
        self.include_libraries = include_libraries
        self._internal = (_TORCH_DIR, _PERFLINT_DIR)
        self._libraries = _library_dirs()
        self._stdlib = _stdlib_dirs()
        self._cache: dict[str, str] = {}

    def category(self, filename: str) -> str:
        found = self._cache.get(filename)
        if found is None:
            found = self._cache[filename] = self._classify(filename)
        return found

    def _classify(self, filename: str) -> str:
        if filename.startswith("<frozen") or filename.startswith(self._internal):
            return INTERNAL
        # Libraries first: without a virtualenv, site-packages lies inside the stdlib directory.
        if filename.startswith(self._libraries) or any(m in filename for m in _LIBRARY_MARKERS):
            return LIBRARY
        if filename.startswith(self._stdlib):
            return INTERNAL
        return USER

    def locate(self, frame: Any) -> tuple[str | None, int | None, str | None, str]:
        """(filename, line, function, source) of the frame an event is attributed to."""
        library = None
        while frame is not None:
            category = self.category(frame.f_code.co_filename)
            if category == USER or (category == LIBRARY and self.include_libraries):
                return _describe(frame)
            if category == LIBRARY and library is None:
                library = frame
            frame = frame.f_back
        # Only library frames (a program installed in site-packages, run with -m): use the first.
        return _describe(library) if library is not None else (None, None, None, "")


def _describe(frame: Any) -> tuple[str, int, str, str]:
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    return filename, lineno, frame.f_code.co_name, linecache.getline(filename, lineno).strip()


class TracingProbe(SyncProbe):
    """A `SyncProbe` that attributes events to the user's lines, tags them with the optimizer
    step, and enforces the trace limits."""

    def __init__(self, stopper: Stopper, *, include_libraries: bool = False, **probe_options: Any) -> None:
        super().__init__(**probe_options)
        self.stopper = stopper
        self.frames = FramePolicy(include_libraries)
        self.event_steps: list[int] = []
        self._program_thread = threading.get_ident()

    def _user_frame(self) -> tuple[str | None, int | None, str | None, str]:
        found = self.frames.locate(sys._getframe(1))
        if found[0] is None and threading.get_ident() != self._program_thread:
            # An event on a thread with no user code on its stack (autograd's device threads
            # run backward() on a GPU): the program's thread is waiting at the line that caused it.
            waiting = sys._current_frames().get(self._program_thread)
            if waiting is not None:
                return self.frames.locate(waiting)
        return found

    def _record(self, layer: str, op: str, reason: str, count: int = 1) -> None:
        if not self._recording or count <= 0:
            return
        self.stopper.check()
        before = len(self.events)
        super()._record(layer, op, reason, count)
        if len(self.events) > before:
            self.event_steps.append(self.stopper.steps)
            self.stopper.after_event(len(self.events))


@contextlib.contextmanager
def optimizer_steps(stopper: Stopper) -> Iterator[None]:
    """Count `optimizer.step()` calls of every optimizer (the global step post-hook)."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    handle = register_optimizer_step_post_hook(lambda optimizer, args, kwargs: stopper.after_step())
    try:
        yield
    finally:
        handle.remove()


class CudaSyncWarnings:
    """Record the syncs `torch.cuda.set_sync_debug_mode("warn")` reports, at the user's line.

    `cuda` is `torch.cuda` (tests pass a stand-in with `get_sync_debug_mode` /
    `set_sync_debug_mode`). The previous debug mode, warning filters and
    `warnings.showwarning` are restored on exit.
    """

    def __init__(self, probe: TracingProbe, cuda: Any = None) -> None:
        self.probe = probe
        self.cuda = cuda if cuda is not None else torch.cuda
        self._catch: Any = None
        self._previous_mode: Any = None
        self._show_next: Any = None

    def __enter__(self) -> CudaSyncWarnings:
        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        try:
            # Only the sync warning is shown every time; the program's other warnings keep their filters.
            warnings.filterwarnings("always", message=re.escape(SYNC_WARNING), category=UserWarning)
            self._show_next = warnings.showwarning
            warnings.showwarning = self._show
            self._previous_mode = self.cuda.get_sync_debug_mode()
            self.cuda.set_sync_debug_mode("warn")
        except BaseException:
            self._catch.__exit__(None, None, None)
            raise
        return self

    def _show(self, message: Any, category: type, filename: str, lineno: int, file: Any = None,
              line: Any = None) -> None:
        if issubclass(category, UserWarning) and SYNC_WARNING in str(message):
            self.probe._record(CUDA_LAYER, CUDA_OP, CUDA_REASON)
            return
        self._show_next(message, category, filename, lineno, file, line)

    def __exit__(self, *exc: Any) -> None:
        try:
            self.cuda.set_sync_debug_mode(self._previous_mode)
        finally:
            self._catch.__exit__(None, None, None)

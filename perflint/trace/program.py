"""Run a user's program in this process the way `python script.py` / `python -m module` would.

`Program.run()` sets `sys.argv`, `sys.path[0]` and `__main__` (through `runpy`), runs the
program, and restores all of it afterwards: the modules the program imported from its own
directory are forgotten too, so that a second run in the same process (a test, the fixed
copy of a script) imports its helpers afresh. What the program did is an `Outcome`: how it
ended, its exit status (as the interpreter would compute it), and the exception if it
raised one. It imports nothing from torch.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

# How a program ended.
COMPLETED = "completed"  # returned, or sys.exit(0) / sys.exit(None)
EXITED = "exited"  # sys.exit(n) with n != 0, or sys.exit("message")
CRASHED = "crashed"  # an uncaught exception
STOPPED = "stopped"  # a trace limit (--steps, --max-events, --max-seconds) stopped it
INTERRUPTED = "interrupted"  # KeyboardInterrupt (Ctrl-C)

_PERFLINT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_RUNPY_FILE = os.path.abspath(runpy.__file__)


class ProgramNotFound(Exception):
    """The script does not exist or the module cannot be found (a usage error)."""


@dataclass
class Outcome:
    kind: str
    status: int | None  # the exit status `python script.py` would have had (None: stopped)
    exception: str | None = None  # "ValueError: message" for a crash
    traceback: str | None = None  # the program's frames only
    exit_message: str | None = None  # sys.exit("message"): printed to stderr, as Python does

    @property
    def failed(self) -> bool:
        return self.kind in (CRASHED, EXITED, INTERRUPTED)

    def to_json(self) -> dict[str, object]:
        return {"outcome": self.kind, "exit_status": self.status, "exception": self.exception,
                "exit_message": self.exit_message}


@dataclass
class Program:
    """A script path or a module name, and the arguments after it."""

    target: str
    args: Sequence[str] = ()
    module: bool = False
    cwd: Path = field(default_factory=Path.cwd)

    @property
    def argv(self) -> list[str]:
        return [self.target, *self.args]

    def describe(self) -> str:
        return " ".join(["python", *(["-m"] if self.module else []), self.target, *self.args])

    def check(self) -> None:
        """Raise ProgramNotFound when the script or module does not exist."""
        if self.module:
            import importlib.util

            before = set(sys.modules)
            # find_spec imports the parent packages: forget them again, as `run` does.
            with _path_entry(str(self.cwd)):
                try:
                    spec = importlib.util.find_spec(self.target)
                except (ImportError, ValueError) as exc:
                    raise ProgramNotFound(f"cannot find module `{self.target}`: {exc}") from None
                finally:
                    _forget_modules(set(sys.modules) - before, str(self.cwd))
            if spec is None:
                raise ProgramNotFound(f"no module named `{self.target}`")
        elif not ((self.cwd / self.target).is_file() or (self.cwd / self.target / "__main__.py").is_file()):
            raise ProgramNotFound(f"no such file: {self.target}")

    def directory(self) -> str:
        """The directory `python` puts first on sys.path for this program."""
        if self.module:
            return str(self.cwd)
        path = os.path.abspath(self.cwd / self.target)
        return path if os.path.isdir(path) else os.path.dirname(path)  # a directory with __main__.py

    def run(self, wrap: Callable[[Callable[[], object]], None] | None = None) -> None:
        """Run the program as `__main__` with its argv and sys.path[0]; exceptions propagate.

        `wrap(body)` lets the caller run `body` inside its own context (the probe). Afterwards
        sys.argv, sys.path, sys.stdout/stderr and the working directory are as before.
        """
        body = self._body()
        saved_argv, saved_path = sys.argv, sys.path[:]
        saved_streams, saved_cwd = (sys.stdout, sys.stderr), os.getcwd()
        saved_modules = set(sys.modules)
        directory = self.directory()
        sys.argv = self.argv
        if sys.path:
            sys.path[0] = directory
        else:
            sys.path.append(directory)
        try:
            (wrap or (lambda run: run()))(body)
        finally:
            # What a process would not need to undo, an in-process run must: the report is
            # written after it, to this process's streams and relative to its directory.
            sys.argv = saved_argv
            sys.path[:] = saved_path
            sys.stdout, sys.stderr = saved_streams
            if os.getcwd() != saved_cwd:
                os.chdir(saved_cwd)
            _forget_modules(set(sys.modules) - saved_modules, directory)

    def _body(self) -> Callable[[], object]:
        if self.module:
            name = self.target
            return lambda: runpy.run_module(name, run_name="__main__", alter_sys=True)
        path = str(self.cwd / self.target) if not os.path.isabs(self.target) else self.target
        return lambda: runpy.run_path(path, run_name="__main__")


class _path_entry:
    def __init__(self, entry: str) -> None:
        self.entry = entry

    def __enter__(self) -> None:
        sys.path.insert(0, self.entry)

    def __exit__(self, *exc: object) -> None:
        try:
            sys.path.remove(self.entry)
        except ValueError:
            pass


def _forget_modules(names: set[str], directory: str) -> None:
    """Drop modules the program imported from its own directory (not installed libraries, not
    perflint's own modules when it runs from a checkout: those may be referenced already)."""
    prefix = os.path.join(os.path.abspath(directory), "")
    for name in names:
        filename = getattr(sys.modules.get(name), "__file__", None)
        if not filename:
            continue
        filename = os.path.abspath(filename)
        if (filename.startswith(prefix) and not filename.startswith(_PERFLINT_DIR)
                and "site-packages" not in filename and "dist-packages" not in filename):
            sys.modules.pop(name, None)


def exit_status(code: object) -> int:
    """The process exit status for `sys.exit(code)`, as the interpreter computes it."""
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else (256 + code) & 0xFF
    return 1  # sys.exit("message"): the message goes to stderr, status 1


def outcome_of(exc: BaseException | None, stopped: bool) -> Outcome:
    """Classify how the program ended; `stopped` says a trace limit was reached."""
    if stopped:
        return Outcome(STOPPED, None)
    if exc is None:
        return Outcome(COMPLETED, 0)
    if isinstance(exc, SystemExit):
        status = exit_status(exc.code)
        message = None if exc.code is None or isinstance(exc.code, int) else str(exc.code)
        return Outcome(COMPLETED if status == 0 else EXITED, status, exit_message=message)
    if isinstance(exc, KeyboardInterrupt):
        return Outcome(INTERRUPTED, 130, "KeyboardInterrupt")
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return Outcome(CRASHED, 1, text, program_traceback(exc))


def _internal(filename: str) -> bool:
    return (filename.startswith(_PERFLINT_DIR) or filename == "<frozen runpy>"
            or os.path.abspath(filename) == _RUNPY_FILE)


def program_traceback(exc: BaseException) -> str:
    """The traceback Python would print, without perflint's and runpy's frames."""
    report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    pending = [report]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        current.stack = traceback.StackSummary.from_list(
            [frame for frame in current.stack if not _internal(frame.filename)])
        pending.extend(c for c in (current.__cause__, current.__context__) if c is not None)
    return "".join(report.format())

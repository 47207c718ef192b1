"""Stopping a traced program cleanly: `--steps`, `--max-events`, `--max-seconds`.

A limit stops the program by raising `TraceStopped` inside it: from the probe at the sync
that reaches `--max-events` (or at the first sync after the deadline), from the global
optimizer step hook after the N-th `optimizer.step()`, and, for `--max-seconds`, from a
`SIGALRM` handler at the next bytecode (POSIX, main thread, no interval timer already
running; elsewhere the deadline is checked at each sync and step). `TraceStopped` derives
from `BaseException`, so the program's `except Exception:` does not swallow it; once a
limit is reached every later sync or step raises it again, so a bare `except:` only delays
the stop. No `sys.settrace` is involved: the program runs at full speed between syncs.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

# How often the alarm fires again after the deadline, in case the program swallowed the stop.
REPEAT_SECONDS = 0.25


class TraceStopped(BaseException):
    """Raised inside the traced program when a trace limit is reached."""


@dataclass(frozen=True)
class Limits:
    steps: int | None = None  # optimizer.step() calls
    max_events: int | None = None  # recorded sync events
    max_seconds: float | None = None  # wall-clock seconds of the program

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "max_events": self.max_events, "max_seconds": self.max_seconds}


class Stopper:
    """Counts optimizer steps and events, and stops the program when a limit is reached.

    `reason` is None until a limit is reached, then says which (`--steps 3`, ...).
    """

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self.reason: str | None = None
        self.steps = 0
        self._deadline: float | None = None
        self._active = False
        self._alarm_armed = False
        self._previous_handler: Any = None

    # ------------------------------------------------------------------ lifetime
    def start(self) -> None:
        """Called just before the program runs."""
        self._active = True
        seconds = self.limits.max_seconds
        if seconds is not None:
            self._deadline = self.clock() + seconds
            self._arm_alarm(seconds)

    def finish(self) -> None:
        """Called as soon as the program returns (idempotent); nothing raises after it."""
        self._active = False
        self._disarm_alarm()

    # ------------------------------------------------------------------ checks
    def check(self) -> None:
        """At each sync event, before it is recorded: a reached limit stops the program."""
        if not self._active:
            return
        if self.reason is not None:
            raise TraceStopped(self.reason)
        if self._deadline is not None and self.clock() >= self._deadline:
            self._stop(f"--max-seconds {self.limits.max_seconds:g}")

    def after_event(self, events: int) -> None:
        limit = self.limits.max_events
        if self._active and limit is not None and events >= limit:
            self._stop(f"--max-events {limit}")

    def after_step(self) -> None:
        """The global optimizer step post-hook."""
        if not self._active:
            return
        self.steps += 1
        self.check()
        limit = self.limits.steps
        if limit is not None and self.steps >= limit:
            self._stop(f"--steps {limit}")

    def _stop(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        raise TraceStopped(self.reason)

    # ------------------------------------------------------------------ SIGALRM
    def _arm_alarm(self, seconds: float) -> None:
        if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
            return
        if signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0):
            return  # someone else's timer runs (a test timeout): rely on the checks at each sync
        self._previous_handler = signal.signal(signal.SIGALRM, self._on_alarm)
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3), REPEAT_SECONDS)
        self._alarm_armed = True

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if self._active:
            self._stop(f"--max-seconds {self.limits.max_seconds:g}")

    def _disarm_alarm(self) -> None:
        if not self._alarm_armed:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous_handler if self._previous_handler is not None
                      else signal.SIG_DFL)
        self._alarm_armed = False

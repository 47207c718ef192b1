"""Per-file work in a pool of forked worker processes, results in input order.

Workers are forked, so they inherit the imported engine, the rules and the work list
itself: only indices go to a worker and only results come back. A small hand-rolled pool
rather than `multiprocessing.Pool` or `ProcessPoolExecutor` because of crashes: when a
worker dies (a segfault in an extension, the OOM killer) `Pool` waits forever and
`ProcessPoolExecutor` fails every pending task. Here each worker reports every item as it
finishes, so the parent knows exactly which item was running when a worker died; that
item gets an error result, the rest of its chunk is handed to a fresh worker, and the run
goes on.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections import deque
from multiprocessing.connection import Connection, wait
from typing import Callable, Generic, Iterator, Sequence, TypeVar

R = TypeVar("R")

# Below this much work (bytes of source) forking costs more than it saves.
MIN_PARALLEL_BYTES = 256 * 1024
MIN_PARALLEL_ITEMS = 4
_MAX_CHUNK = 16
_CHUNKS_IN_FLIGHT = 2  # per worker, so that a worker never waits for its next chunk


def default_jobs() -> int:
    """The CPUs this process may run on (respects affinity masks and container limits)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def fork_available() -> bool:
    return sys.platform != "win32" and "fork" in multiprocessing.get_all_start_methods()


def effective_jobs(jobs: int | None, items: int, total_bytes: int | None = None) -> int:
    """How many worker processes to use; 1 means run in this process."""
    wanted = default_jobs() if jobs is None or jobs <= 0 else jobs
    if wanted <= 1 or not fork_available() or items < MIN_PARALLEL_ITEMS:
        return 1
    if threading.active_count() > 1:  # forking a threaded program can deadlock in the child
        return 1
    if total_bytes is not None and total_bytes < MIN_PARALLEL_BYTES:
        return 1
    return min(wanted, items)


class _Failed:
    """Sent by a worker instead of a result when the work function raised."""

    def __init__(self, message: str) -> None:
        self.message = message


def describe_exception(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def ordered_map(
    func: Callable[[int], R],
    count: int,
    *,
    jobs: int,
    on_error: Callable[[int, str], R],
    schedule: Sequence[int] | None = None,
) -> Iterator[R]:
    """Yield `func(0) .. func(count - 1)` in that order, computed by `jobs` forked workers.

    `func` runs in the workers (it may be a closure: nothing but indices and results is
    pickled). When it raises, or its worker dies while running it, `on_error(index, reason)`
    is yielded in its place. `schedule` is the order in which items are handed out (e.g.
    largest first, so that one big file does not finish last); results are still yielded
    in index order.
    """
    if count <= 0:
        return
    if jobs <= 1 or not fork_available():
        for index in range(count):
            try:
                result = func(index)
            except Exception as exc:  # a bug in one item must not lose the others
                result = on_error(index, describe_exception(exc))
            yield result
        return
    yield from _Pool(func, count, min(jobs, count), on_error, schedule).run()


class _Worker:
    def __init__(self, process: multiprocessing.process.BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.chunks: deque[list[int]] = deque()  # handed out, not yet finished


class _Pool(Generic[R]):
    def __init__(self, func: Callable[[int], R], count: int, jobs: int,
                 on_error: Callable[[int, str], R], schedule: Sequence[int] | None) -> None:
        self.func = func
        self.count = count
        self.jobs = jobs
        self.on_error = on_error
        order = list(schedule) if schedule is not None else list(range(count))
        chunk = max(1, min(_MAX_CHUNK, count // (jobs * 8)))
        self.pending: deque[list[int]] = deque(order[i:i + chunk] for i in range(0, count, chunk))
        self.results: dict[int, R] = {}
        self.workers: list[_Worker] = []
        self.idle_deaths = 0
        self.context = multiprocessing.get_context("fork")

    # ----------------------------------------------------------------- parent side
    def run(self) -> Iterator[R]:
        next_index = 0
        try:
            for _ in range(self.jobs):
                self._spawn()
            while next_index < self.count:
                while next_index in self.results:
                    yield self.results.pop(next_index)
                    next_index += 1
                if next_index >= self.count:
                    break
                self._feed()
                self._receive()
        finally:
            self._shutdown()

    def _spawn(self) -> None:
        for stream in (sys.stdout, sys.stderr):  # or the child would write buffered text again
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        parent_end, child_end = self.context.Pipe(duplex=True)
        inherited = [w.conn for w in self.workers] + [parent_end]
        process = self.context.Process(
            target=_worker_main, args=(child_end, inherited, self.func), daemon=True,
            name="perflint-worker",
        )
        process.start()
        child_end.close()  # so that the parent sees EOF when the worker dies
        self.workers.append(_Worker(process, parent_end))

    def _feed(self) -> None:
        for worker in list(self.workers):
            while self.pending and len(worker.chunks) < _CHUNKS_IN_FLIGHT:
                chunk = self.pending.popleft()
                try:
                    worker.conn.send(chunk)
                except OSError:  # it died while idle
                    self.pending.appendleft(chunk)
                    self._worker_died(worker)
                    break
                worker.chunks.append(chunk)

    def _receive(self) -> None:
        busy = [w for w in self.workers if w.chunks]
        if not busy:
            if not self.workers and self.pending:
                self._spawn()
            return
        ready = wait([w.conn for w in busy])
        for worker in busy:
            if worker.conn not in ready:
                continue
            try:
                message = worker.conn.recv()
            except (EOFError, OSError):
                self._worker_died(worker)
                continue
            if message is None:  # the chunk at the head is finished
                worker.chunks.popleft()
                continue
            index, result = message
            if isinstance(result, _Failed):
                result = self.on_error(index, result.message)
            self.results[index] = result
            head = worker.chunks[0]
            head.remove(index)

    def _worker_died(self, worker: _Worker) -> None:
        worker.process.join(timeout=5)
        reason = _exit_reason(worker.process.exitcode)
        worker.conn.close()
        self.workers.remove(worker)
        unfinished = [i for chunk in worker.chunks for i in chunk]
        if not unfinished:
            self.idle_deaths += 1
            if self.idle_deaths > 2 * self.jobs:  # workers cannot even start: do it here
                self._run_pending_here()
                return
        if unfinished:
            culprit = unfinished[0]  # items run in order; the first unfinished one was running
            self.results[culprit] = self.on_error(culprit, f"the worker process {reason} while analyzing it")
            rest = unfinished[1:]
            if rest:
                self.pending.appendleft(rest)
        if self.pending:
            self._spawn()

    def _run_pending_here(self) -> None:
        while self.pending:
            for index in self.pending.popleft():
                try:
                    self.results[index] = self.func(index)
                except Exception as exc:
                    self.results[index] = self.on_error(index, describe_exception(exc))

    def _shutdown(self) -> None:
        for worker in self.workers:
            try:
                worker.conn.send(None)
            except OSError:
                pass
        for worker in self.workers:
            worker.process.join(timeout=2)
            if worker.process.is_alive():  # interrupted mid-file: do not wait for it
                worker.process.terminate()
                worker.process.join(timeout=2)
            if worker.process.is_alive():  # pragma: no cover - ignored SIGTERM
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self.workers.clear()


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "stopped responding"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of memory?)" if -code == signal.SIGKILL else ""
        return f"was killed by {name}{hint}"
    return f"exited with status {code}"


# --------------------------------------------------------------------------- worker side
def _worker_main(conn: Connection, inherited: list[Connection], func: Callable[[int], object]) -> None:
    # The parent handles Ctrl-C and stops the workers; a traceback per worker is noise.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for other in inherited:  # parent ends of every pipe: keep only our own child end, so
        other.close()  # that the parent's death reads as EOF here
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):
            return
        if chunk is None:
            return
        for index in chunk:
            try:
                result: object = func(index)
            except Exception as exc:
                result = _Failed(describe_exception(exc))
            try:
                conn.send((index, result))
            except (OSError, EOFError):
                return
            except Exception as exc:  # the result could not be pickled
                conn.send((index, _Failed(f"cannot send the result back: {describe_exception(exc)}")))
        try:
            conn.send(None)
        except (OSError, EOFError):
            return

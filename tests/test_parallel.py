"""The forked worker pool: order, errors, crashes, and the fallback to one process."""

from __future__ import annotations

import os
import signal

import pytest

from perflint import parallel
from perflint.parallel import effective_jobs, ordered_map

pytestmark = pytest.mark.skipif(not parallel.fork_available(), reason="needs fork")


def _error(index: int, reason: str) -> str:
    return f"error {index}: {reason}"


def test_results_come_back_in_index_order_whatever_the_schedule():
    pids = set()

    def work(index: int) -> tuple[int, int]:
        return index * index, os.getpid()

    results = list(ordered_map(work, 50, jobs=2, on_error=_error, schedule=list(reversed(range(50)))))
    assert [r[0] for r in results] == [i * i for i in range(50)]
    pids.update(r[1] for r in results)
    assert os.getpid() not in pids  # the work really ran in workers
    assert len(pids) == 2


def test_an_exception_becomes_that_item_s_error_and_the_run_goes_on():
    def work(index: int) -> str:
        if index == 7:
            raise ValueError("bad input")
        return f"ok {index}"

    results = list(ordered_map(work, 20, jobs=2, on_error=_error))
    assert results[7] == "error 7: ValueError: bad input"
    assert results[:7] + results[8:] == [f"ok {i}" for i in range(20) if i != 7]


@pytest.mark.parametrize("how", ["sigkill", "exit"])
def test_a_worker_crash_costs_one_item_not_the_run(how):
    def work(index: int) -> str:
        if index in (3, 11):
            if how == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(3)
        return f"ok {index}"

    results = list(ordered_map(work, 30, jobs=2, on_error=_error))
    expected_reason = "was killed by SIGKILL" if how == "sigkill" else "exited with status 3"
    for index in (3, 11):
        assert results[index].startswith(f"error {index}: the worker process {expected_reason}"), results[index]
    assert [r for i, r in enumerate(results) if i not in (3, 11)] == [f"ok {i}" for i in range(30) if i not in (3, 11)]


def test_every_item_crashing_still_ends_with_one_error_each():
    def work(index: int) -> int:
        os._exit(1)

    results = list(ordered_map(work, 6, jobs=2, on_error=_error))
    assert [r.split(":")[0] for r in results] == [f"error {i}" for i in range(6)]


def test_one_process_for_small_work_or_jobs_1():
    assert effective_jobs(1, 1000, 10**9) == 1
    assert effective_jobs(4, 2, 10**9) == 1  # a handful of files
    assert effective_jobs(4, 100, 1000) == 1  # tiny files
    assert effective_jobs(4, 100, 10**9) == 4
    assert effective_jobs(None, 100, 10**9) == parallel.default_jobs() or parallel.default_jobs() == 1


def test_in_process_path_reports_errors_the_same_way():
    def work(index: int) -> str:
        if index == 1:
            raise RuntimeError("boom")
        return "ok"

    assert list(ordered_map(work, 3, jobs=1, on_error=_error)) == ["ok", "error 1: RuntimeError: boom", "ok"]


def test_a_threaded_caller_gets_no_fork():
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert effective_jobs(4, 100, 10**9) == 1
    finally:
        stop.set()
        thread.join()
    assert effective_jobs(4, 100, 10**9) == 4

"""The daemon's blocking executor: results, errors, context, cancellation and shutdown."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from roost.system.blocking import BlockingExecutor, ExecutorClosed

REQUEST = contextvars.ContextVar("request", default="none")


async def test_runs_off_the_loop_thread_and_returns_the_result() -> None:
    ex = BlockingExecutor(workers=2)
    try:
        name = await ex.run(lambda: threading.current_thread().name)
        assert name.startswith("roost-io_") and name != threading.current_thread().name
        assert await ex.run(divmod, 17, 5) == (3, 2)
        assert await ex.run(int, "ff", base=16) == 255
    finally:
        ex.shutdown()


async def test_an_exception_reaches_the_awaiting_task_unchanged() -> None:
    ex = BlockingExecutor()
    try:
        with pytest.raises(FileNotFoundError):
            await ex.run(open, "/nonexistent/roost/file")
        assert await ex.run(lambda: "still serving") == "still serving"
    finally:
        ex.shutdown()


async def test_the_callers_context_variables_travel_with_the_job() -> None:
    ex = BlockingExecutor()
    try:
        REQUEST.set("req-7")
        assert await ex.run(REQUEST.get) == "req-7"
    finally:
        ex.shutdown()


async def test_jobs_run_in_parallel_up_to_the_worker_count() -> None:
    ex = BlockingExecutor(workers=4)
    barrier = threading.Barrier(4, timeout=10)
    try:
        # Four jobs that can only finish together: they must be on four threads at once.
        arrivals = await asyncio.gather(*(ex.run(barrier.wait) for _ in range(4)))
        assert sorted(arrivals) == [0, 1, 2, 3]
    finally:
        ex.shutdown()


async def test_a_cancelled_waiter_leaves_the_executor_healthy() -> None:
    ex = BlockingExecutor(workers=1)
    release = threading.Event()
    try:
        waiter = asyncio.ensure_future(ex.run(release.wait, 10))
        await asyncio.sleep(0.05)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        release.set()  # the job still finishes; its answer finds nobody and is dropped
        assert await ex.run(lambda: 42) == 42
    finally:
        ex.shutdown()


async def test_shutdown_finishes_queued_work_then_refuses_more() -> None:
    ex = BlockingExecutor(workers=1)
    done: list[int] = []
    futs = [ex.submit(lambda i=i: (time.sleep(0.01), done.append(i))) for i in range(5)]
    await asyncio.to_thread(ex.shutdown)
    assert done == [0, 1, 2, 3, 4]
    await asyncio.sleep(0)  # let the settled answers land
    assert all(f.done() for f in futs)
    with pytest.raises(ExecutorClosed):
        await ex.run(lambda: None)

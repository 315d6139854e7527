"""The one executor every blocking file and SQLite call goes through.

The event loop never blocks on disk: handlers ``await blocking.run(fn, ...)``. Processes are
never spawned from here (Linux parent-death semantics follow the spawning thread), only from
the event loop's own thread.

Why not ``loop.run_in_executor`` on a ``ThreadPoolExecutor``: a relayed send waits on one of
these hops before it can answer, and the stdlib path (a concurrent future chained to an asyncio
future, a thread-count check per submit) costs about twice what it must. Here a job is one tuple
on a queue and its answer one ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

__all__ = ["BlockingExecutor", "ExecutorClosed"]

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[[], Any]]


class ExecutorClosed(RuntimeError):
    """A blocking call was submitted after the daemon's executor shut down."""


def _settle(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if fut.done():  # the awaiting task was cancelled meanwhile
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


class BlockingExecutor:
    """A fixed pool of worker threads (started on first use) with a typed ``run``; one per daemon."""

    def __init__(self, workers: int = 4) -> None:
        self._workers = workers
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn`` on a worker thread (with the caller's context variables) and await it."""
        result: T = await self.submit(fn, *args, **kwargs)
        return result

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> asyncio.Future[T]:
        """Queue ``fn`` and return the future of its result (fire-and-forget callers may drop it)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        if self._closed:
            raise ExecutorClosed("the daemon's blocking executor has shut down")
        if len(self._threads) < self._workers:
            self._start_workers()
        self._queue.put((loop, fut, contextvars.copy_context(), lambda: fn(*args, **kwargs)))
        return fut

    def _start_workers(self) -> None:
        with self._lock:
            while len(self._threads) < self._workers:
                t = threading.Thread(target=self._work, name=f"roost-io_{len(self._threads)}", daemon=True)
                t.start()
                self._threads.append(t)

    def _work(self) -> None:
        get = self._queue.get
        while True:
            job = get()
            if job is None:
                return
            loop, fut, ctx, call = job
            try:
                value: Any = ctx.run(call)
                ok = True
            except BaseException as exc:  # handed to the awaiting task, which decides
                value, ok = exc, False
            # RuntimeError: the loop closed while this ran, and nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, fut, ok, value)
            del job, fut, value, call

    def shutdown(self) -> None:
        """Finish queued jobs, then stop every worker (blocking)."""
        with self._lock:
            self._closed = True
            threads, self._threads = self._threads, []
        for _ in threads:
            self._queue.put(None)
        for t in threads:
            t.join()

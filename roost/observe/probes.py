"""Event-loop probes: loop lag, the systemd watchdog ping, ``STATUS=`` updates, scrape-time gauges.

Why from event-loop tasks and not threads: each is a proof that the loop still schedules work.
The lag probe sleeps 50 ms and records how late it woke (``roost_event_loop_lag_seconds``);
the watchdog ping is sent only when the loop runs, so a wedged loop (a blocking call that
escaped the executor) gets the daemon restarted by systemd instead of hanging forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, Protocol

import structlog

from roost.observe.history import GaugeHistory, Sample
from roost.observe.metrics import Metrics
from roost.state.sessions import SessionTable
from roost.system import sdnotify

__all__ = ["LAG_INTERVAL", "Draining", "LiveJob", "LiveJobs", "Probes", "counts_by_state", "status_line"]

log = structlog.get_logger("roost.probes")

LAG_INTERVAL = 0.05
STATUS_INTERVAL = 2.0


class LiveJob(Protocol):
    """What a probe reads of one job."""

    @property
    def job_id(self) -> str: ...

    @property
    def state(self) -> str: ...


class LiveJobs(Protocol):
    """The jobs the launcher holds in memory (every active job is there)."""

    @property
    def jobs(self) -> Mapping[str, LiveJob]: ...


class Draining(Protocol):
    """Whether the referee refuses new work because the daemon drains."""

    @property
    def draining(self) -> bool: ...


def counts_by_state(jobs: Iterable[LiveJob]) -> dict[str, int]:
    """Jobs per state."""
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.state] = counts.get(job.state, 0) + 1
    return counts


def status_line(table: SessionTable, jobs: LiveJobs, referee: Draining) -> str:
    """The one-line ``STATUS=`` shown by ``systemctl status``."""
    counts = counts_by_state(jobs.jobs.values())
    active = counts.get("starting", 0) + counts.get("running", 0)
    text = f"{table.running} capsules running, {active} jobs active, {len(table.reservations)} slots reserved"
    if referee.draining:
        text += "; draining"
    return text


class Probes:
    """Service object: started with the daemon, stopped before the store closes."""

    def __init__(
        self,
        *,
        metrics: Metrics,
        table: SessionTable,
        jobs: LiveJobs,
        referee: Draining,
        notify: Callable[..., bool] = sdnotify.notify,
    ) -> None:
        self._metrics = metrics
        self._table = table
        self._jobs = jobs
        self._referee = referee
        self.notify = notify
        self._tasks: list[asyncio.Task[None]] = []
        self._last_status = ""
        # Recent lag samples (seconds) for ``GET /debug/loop-lag`` and the storm benchmark.
        self.lag_samples: deque[float] = deque(maxlen=20_000)
        self.history = GaugeHistory()
        self._lag_max = 0.0  # the worst lag since the last history sample

    async def start(self) -> None:
        self._spawn(self._lag_loop())
        self._spawn(self._history_loop())

    def sample(self, now_ms: int) -> Sample:
        """The gauges now, as the history ring keeps them (resets the worst lag seen)."""
        counts = self.job_counts()
        decisions = self._metrics.spawn_decisions()
        lag, self._lag_max = self._lag_max, 0.0
        return Sample(
            now_ms,
            self._table.running,
            counts.get("starting", 0),
            round(lag * 1000, 3),
            sum(decisions.values()),
            sum(n for outcome, n in decisions.items() if outcome != "granted"),
        )

    async def _history_loop(self) -> None:
        while True:
            try:
                self.history.record(self.sample(time.time_ns() // 1_000_000))
            except Exception:
                log.exception("history_sample_failed")
            await asyncio.sleep(self.history.interval_secs)

    def start_notifications(self) -> None:
        """Watchdog pings and ``STATUS=`` updates; called once READY=1 was sent (``_serve`` only)."""
        interval = sdnotify.watchdog_interval()
        if interval is not None:
            self._spawn(self._watchdog_loop(interval))
        self._spawn(self._status_loop())

    def status_line(self) -> str:
        """The one-line ``STATUS=`` now."""
        return status_line(self._table, self._jobs, self._referee)

    def job_counts(self) -> dict[str, int]:
        """Jobs per state among those the launcher holds in memory."""
        return counts_by_state(self._jobs.jobs.values())

    def refresh_gauges(self) -> None:
        """Set the gauges that are cheaper to read at scrape time than to keep in step."""
        m = self._metrics
        m.capsules.labels(state="running").set(self._table.running)
        m.capsules.labels(state="reserved").set(len(self._table.reservations))
        # roost_jobs{state} is kept in step by the launcher itself (it owns the transitions).

    def scrape(self) -> bytes:
        """The metrics text: scrape-time gauges refreshed, then the registry rendered."""
        self.refresh_gauges()
        return self._metrics.render()

    def push_status(self) -> None:
        line = self.status_line()
        if line != self._last_status:
            self._last_status = line
            self.notify(f"STATUS={line}")

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(coro))

    async def _lag_loop(self) -> None:
        loop = asyncio.get_running_loop()
        hist = self._metrics.loop_lag
        while True:
            t0 = loop.time()
            await asyncio.sleep(LAG_INTERVAL)
            lag = max(0.0, loop.time() - t0 - LAG_INTERVAL)
            hist.observe(lag)
            self.lag_samples.append(lag)
            if lag > self._lag_max:
                self._lag_max = lag

    async def _watchdog_loop(self, interval: float) -> None:
        while True:
            self.notify("WATCHDOG=1")
            await asyncio.sleep(interval)

    async def _status_loop(self) -> None:
        while True:
            try:
                self.push_status()
            except Exception:
                log.exception("status_update_failed")
            await asyncio.sleep(STATUS_INTERVAL)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()

"""Operator actions shared by the admin API and the signal handlers: drain, key rotation, reload.

Why here and not in the handlers: SIGHUP and ``POST /reload`` must do exactly the same thing,
and so must a drain started by ``roostctl drain`` and one a test starts in-process. Each action
asks the owner of the state it changes: the referee drains, the key holder rotates, the
settings reload; nothing here is rewired.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Protocol

import structlog

from roost.core.admin_models import DrainAnswer, DrainedJobView, DrainStatus, ReloadAnswer, RotateAnswer
from roost.core.wire import ACTIVE_JOB_STATES
from roost.observe.probes import LiveJob, counts_by_state
from roost.state.keys import KeyHolder
from roost.state.lifecycle import Lifecycle
from roost.state.sessions import Reservation, SessionTable
from roost.state.settings import Settings
from roost.system import sdnotify

__all__ = ["Control", "DrainedJob", "DrainedJobs", "DrainingReferee"]

log = structlog.get_logger("roost.admin")

DRAIN_POLL_SECS = 0.2


class DrainingReferee(Protocol):
    """The control's view of the referee: draining, and releasing the slots of pending approvals."""

    @property
    def draining(self) -> bool: ...

    def start_draining(self) -> bool: ...

    def release_slots_of(self, parent_id: str) -> list[Reservation]: ...


class DrainedJob(LiveJob, Protocol):
    """What ``roostctl drain --wait`` shows of a job it waits for."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def created_ms(self) -> int: ...

    @property
    def parent_id(self) -> str | None: ...


class DrainedJobs(Protocol):
    """The jobs the launcher holds in memory (every active job is there)."""

    @property
    def jobs(self) -> Mapping[str, DrainedJob]: ...


class Control:
    def __init__(
        self,
        *,
        referee: DrainingReferee,
        table: SessionTable,
        jobs: DrainedJobs,
        keys: KeyHolder,
        settings: Settings,
        lifecycle: Lifecycle,
        status_line: Callable[[], str],
    ) -> None:
        self._referee = referee
        self._table = table
        self._jobs = jobs
        self._keys = keys
        self._settings = settings
        self._lifecycle = lifecycle
        self._status_line = status_line
        # Loop time at which a drain stops the daemon even with work left (None: wait for it).
        self.drain_deadline: float | None = None

    # -- drain -----------------------------------------------------------------------------------

    def active_work(self) -> tuple[int, int]:
        """(running sessions, active jobs): what a drain waits for."""
        counts = counts_by_state(self._jobs.jobs.values())
        return self._table.running, sum(counts.get(s, 0) for s in ACTIVE_JOB_STATES)

    def active_jobs(self) -> list[DrainedJobView]:
        """The jobs a drain is waiting for, oldest first (what ``roostctl drain --wait`` lists)."""
        jobs = [j for j in self._jobs.jobs.values() if j.state in ACTIVE_JOB_STATES]
        jobs.sort(key=lambda j: (j.created_ms, j.job_id))
        return [
            {
                "job_id": j.job_id,
                "name": j.name,
                "version": j.version,
                "state": j.state,
                "created_ms": j.created_ms,
                "parent_session_id": j.parent_id,
            }
            for j in jobs
        ]

    def drain(self, *, timeout_secs: float | None = None) -> DrainAnswer:
        """Refuse new spawns and launches, wait for running work to end, then ask the daemon to stop.

        Idempotent: a second drain does not start a second waiter, but its deadline applies (the
        earlier of the two wins), so ``drain --deadline`` on a daemon already draining is honoured.
        """
        already = self._referee.start_draining()
        loop = asyncio.get_running_loop()
        if timeout_secs is not None:
            wanted = loop.time() + timeout_secs
            if self.drain_deadline is None or wanted < self.drain_deadline:
                self.drain_deadline = wanted
        sessions, jobs = self.active_work()
        if not already:
            log.info("drain_started", running_sessions=sessions, active_jobs=jobs, timeout_secs=timeout_secs)
            self._lifecycle.spawn(self._drain_then_stop())
        elif timeout_secs is not None:
            log.info("drain_deadline_set", timeout_secs=timeout_secs)
        return {"already_draining": already, **self.drain_status()}

    def drain_status(self) -> DrainStatus:
        """Whether the daemon drains, what it still waits for, and how long until it stops anyway."""
        sessions, jobs = self.active_work()
        deadline = self.drain_deadline
        left = None if deadline is None else round(max(0.0, deadline - asyncio.get_running_loop().time()), 3)
        return {
            "draining": self._referee.draining,
            "running_sessions": sessions,
            "active_jobs": jobs,
            "deadline_in_secs": left,
            "jobs": self.active_jobs(),
        }

    async def _drain_then_stop(self) -> None:
        loop = asyncio.get_running_loop()
        while any(self.active_work()):
            deadline = self.drain_deadline
            if deadline is not None and loop.time() >= deadline:
                sessions, jobs = self.active_work()
                log.warning("drain_timeout", running_sessions=sessions, active_jobs=jobs)
                break
            await asyncio.sleep(DRAIN_POLL_SECS)
        log.info("drain_finished")
        self._lifecycle.request_stop("drain")

    # -- keys ------------------------------------------------------------------------------------

    async def rotate_keys(self, grace_secs: float = 0.0) -> RotateAnswer:
        """Replace the master key; every credential, approval and handle dies (all derive from it)
        — at once, or once ``grace_secs`` have passed: until then the old key still verifies
        (never mints) and the sessions running now keep their door keys (roost/state/keys.py).

        With ``--ephemeral-keys`` the new key lives in memory only, like the old one. Without a
        grace, pending reservations are released at once: their approvals can no longer be
        redeemed, so keeping their slots would only block new spawns for up to 60 s.
        """
        table = self._table
        running = [sid for sid, rec in table.sessions.items() if rec.running]
        old, ring = await self._keys.rotate(grace_secs, running)
        pending = 0
        if grace_secs <= 0:
            for parent_id in list(table.reservations_of):
                pending += len(self._referee.release_slots_of(parent_id))
        affected = table.running
        log.warning(
            "keys_rotated",
            previous_key_id=old.key_id,
            key_id=ring.key_id,
            sessions_affected=affected,
            approvals_revoked=pending,
            grace_secs=grace_secs,
            ephemeral=not self._keys.persisted,
        )
        return {
            "key_id": ring.key_id,
            "previous_key_id": old.key_id,
            "sessions_affected": affected,
            "approvals_revoked": pending,
            "grace_secs": grace_secs,
            "persisted": self._keys.persisted,
        }

    # -- reload ----------------------------------------------------------------------------------

    async def reload(self) -> ReloadAnswer:
        """SIGHUP / ``POST /reload``: RELOADING=1, re-read config and registry, READY=1 again."""
        sdnotify.notify("RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}")
        try:
            return await self._settings.reload()
        finally:
            sdnotify.notify("READY=1", f"STATUS={self._status_line()}")

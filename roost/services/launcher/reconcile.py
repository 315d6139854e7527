"""Start-up reconcile: make the jobs table true again after the daemon was away.

For every job that was ``starting`` or ``running`` when the previous daemon stopped (cleanly or
with ``kill -9``):

* **matched** — its process is alive with the same pid *and* the same start (clock ticks
  since boot, :mod:`roost.system.procstart`): it is
  re-adopted (watched without being its parent, its deadline re-armed from the ready time, its
  lifeline still held);
* **lost** — its process is gone: it is finalized exactly as a live exit would be, with exactly
  one ``completion.json`` (a record the child already wrote is respected, a delivery that may
  have been in flight is not repeated, and a ``delegation`` line already in the parent's trace
  is not written again). Lost parents are finalized first, so a lost child of a lost parent is
  treated as a child whose parent ended (no completion);
* **orphans** — processes carrying ``MURMUR_JOB_ID`` from this daemon instance
  (``MURMUR_ROOST_INSTANCE``) that no live job accounts for: ended with their process group;
* **removed** — lifelines still held for jobs that are no longer live: closed; and, with a
  backend that keeps more per job than a process (:class:`LeftoverHolder`: Ray's placement groups
  and node keepers' entries), what it still holds for a job no unfinished record accounts for.

A backend whose machines may not answer when the daemon starts (:class:`ReachesLater`: a
cluster) cannot say what still runs there; reconcile then waits until it answers (the launcher
runs it in the background and refuses launches and cancels until it is done), so a child that
merely could not be asked is never finalized ``lost``.

The counts go to the log and to the ``roost.process.reconcile`` span. Everything here goes
through the launcher's public methods (:class:`Reconcilable`) and the process backend.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol, runtime_checkable

import structlog

from roost.backends.base import ChildRef, ProcessBackend
from roost.core.jobs import Job
from roost.observe.events import EventBus
from roost.state.sessions import SessionTable

__all__ = ["GONE_STATUS", "LeftoverHolder", "ReachesLater", "Reconcilable", "reconcile"]

log = structlog.get_logger("roost.launcher")

GONE_STATUS = "exit status unknown: the process ended while the daemon was not running"


class Reconcilable(Protocol):
    """What reconcile asks of the launcher."""

    async def unfinished(self) -> list[Job]:
        """Jobs the store says were starting or running, oldest first."""
        ...

    def adopt(self, job: Job) -> None:
        """Supervise the job's still-running child."""
        ...

    async def finalize_lost(self, job: Job, exit_status: str) -> None:
        """Finalize a job whose child ended while no daemon watched."""
        ...

    def parent_gone(self, job_id: str) -> None:
        """The job's parent session has ended: close its lifeline."""
        ...


@runtime_checkable
class LeftoverHolder(Protocol):
    """A backend that can hold something for a job beyond its process (a reservation, a record
    of an ended child) which outlives a daemon that died before it let go."""

    async def remove_leftovers(self, keep: set[str]) -> int:
        """Let go of what is held for any job not in ``keep``; how many jobs' leftovers went."""
        ...


@runtime_checkable
class ReachesLater(Protocol):
    """A backend whose machines may be out of reach at start-up (it keeps trying)."""

    @property
    def reachable(self) -> bool:
        """Whether the backend can ask its machines what runs there now."""
        ...

    async def wait_reachable(self) -> None:
        """Return once :attr:`reachable` is true."""
        ...

    def unreachable_sentence(self) -> str | None:
        """Why nothing can be launched now (None once reachable)."""
        ...


async def reconcile(
    launcher: Reconcilable, backend: ProcessBackend, table: SessionTable, events: EventBus
) -> dict[str, int]:
    span = events.start("roost.process.reconcile", subsystem="process")
    jobs = await launcher.unfinished()
    held = await backend.held_lifelines()
    alive = await asyncio.gather(*(backend.is_running(ChildRef(j.job_id, j.pid, j.pid_start, j.node)) for j in jobs))
    matched: list[Job] = []
    lost: list[Job] = []
    for job, is_alive in zip(jobs, alive, strict=True):
        (matched if is_alive else lost).append(job)
    for job in matched:
        launcher.adopt(job)
    live_ids = {j.job_id for j in matched}
    # Orphans: processes from this instance's launches with no live job behind them.
    orphans = 0
    orphan_jobs: set[str] = set()
    for found in await backend.list_running(events.run_id):
        if found.job_id in live_ids:
            continue
        orphans += 1
        orphan_jobs.add(found.job_id)
        await backend.end_orphan(found)
    removed = 0
    # An orphan's lifeline (the holder, or a node's keeper, holds one for each child) went with it:
    # counted once, as an orphan.
    for key in held:
        if key not in live_ids and key not in orphan_jobs:
            backend.lifeline_close(key)
            removed += 1
    if isinstance(backend, LeftoverHolder):
        # After the orphans (each already let go of its own), and sparing every unfinished job:
        # a lost one's leftovers go when it is finalized below.
        removed += await backend.remove_leftovers({j.job_id for j in jobs})
    for job in lost:
        await launcher.finalize_lost(job, GONE_STATUS)
    # A re-adopted child whose parent ended while the daemon was away: close its lifeline now.
    for job in matched:
        if job.parent_id is not None:
            parent = table.get(job.parent_id)
            if parent is None or not parent.running:
                launcher.parent_gone(job.job_id)
    counts = {"matched": len(matched), "lost": len(lost), "orphans": orphans, "removed": removed}
    attrs: dict[str, Any] = {
        "roost.process.reconcile_result": "ok",
        "roost.process.matched": counts["matched"],
        "roost.process.lost": counts["lost"],
        "roost.process.orphans": counts["orphans"],
        "roost.process.removed": counts["removed"],
    }
    span.completed(**attrs)
    log.info("reconciled", **counts)
    return counts

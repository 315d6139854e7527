"""Start-up reconcile: make the jobs table true again after the daemon was away.

For every job that was ``starting`` or ``running`` when the previous daemon stopped (cleanly or
with ``kill -9``):

* **matched** — its process is alive with the same pid *and* the same create time: it is
  re-adopted (watched through a pidfd without being its parent, its deadline re-armed from the
  ready time, its lifeline still held by the keeper);
* **lost** — its process is gone: it is finalized exactly as a live exit would be, with exactly
  one ``completion.json`` (a record the child already wrote is respected, a delivery that may
  have been in flight is not repeated, and a ``delegation`` line already in the parent's trace
  is not written again). Lost parents are finalized first, so a lost child of a lost parent is
  treated as a child whose parent ended (no completion);
* **orphans** — processes of this uid carrying ``MURMUR_JOB_ID`` from this daemon instance
  (``MURMUR_ROOST_INSTANCE``) that no live job accounts for: ended with their process group;
* **removed** — lifelines the keeper still held for jobs that are no longer live: closed.

The counts go to the log and to the ``roost.process.reconcile`` span.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import structlog

from roost.launcher.backend import ChildRef
from roost.launcher.jobs import Job
from roost.referee import wall_ms

if TYPE_CHECKING:
    from roost.launcher.service import Launcher

__all__ = ["reconcile"]

log = structlog.get_logger("roost.launcher")

GONE_STATUS = "exit status unknown: the process ended while the daemon was not running"


async def reconcile(launcher: Launcher) -> dict[str, int]:
    roost = launcher.roost
    span = roost.events.start("roost.process.reconcile", subsystem="process")
    rows = await roost.executor.run(
        roost.store.rows, "SELECT * FROM jobs WHERE state IN ('starting', 'running') ORDER BY created_ms"
    )
    jobs = [Job.from_row(r) for r in rows]
    backend = launcher.backend
    held = await backend.held_lifelines()
    alive = await asyncio.gather(*(backend.is_running(ChildRef(j.job_id, j.pid, j.pid_start, j.node)) for j in jobs))
    matched: list[Job] = []
    lost: list[Job] = []
    for job, is_alive in zip(jobs, alive, strict=True):
        launcher._reconciled.add(job.job_id)
        (matched if is_alive else lost).append(job)
    for job in matched:
        _adopt(launcher, job)
    live_ids = {j.job_id for j in matched}
    # Orphans: processes from this instance's launches with no live job behind them.
    orphans = 0
    for found in await backend.list_running(roost.events.run_id):
        if found.job_id in live_ids:
            continue
        orphans += 1
        await backend.end_orphan(found)
    removed = 0
    for key in held:
        if key not in live_ids:
            backend.lifeline_close(key)
            removed += 1
    for job in lost:
        launcher._remember(job)
        roost.metrics.jobs.labels(state=job.state).inc()
        await launcher._finalize(job, GONE_STATUS)
    # A re-adopted child whose parent ended while the daemon was away: close its lifeline now.
    for job in matched:
        if job.parent_id is not None:
            parent = roost.table.get(job.parent_id)
            if parent is None or not parent.running:
                launcher._parent_ended(job.job_id)
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


def _adopt(launcher: Launcher, job: Job) -> None:
    """Watch a child another daemon instance started; re-arm its deadline; relink its parent."""
    from roost.launcher.service import _Live

    roost = launcher.roost
    loop = asyncio.get_running_loop()
    if job.session_id is None:
        for rec in roost.table.iter_running():
            if rec.job_id == job.job_id or rec.pid == job.pid:
                job.session_id, job.capsule_url = rec.session_id, rec.capsule_url
                break
    if job.state == "starting":
        # It got as far as a session (or will never report to anyone): supervise it as running.
        job.state = "running"
        job.ready_ms = job.ready_ms or job.created_ms
    assert job.pid is not None
    live = _Live(child=launcher.backend.adopt(ChildRef(job.job_id, job.pid, job.pid_start, job.node)))
    launcher._live[job.job_id] = live
    launcher._remember(job)
    roost.metrics.jobs.labels(state=job.state).inc()
    if job.parent_id is not None:
        launcher._children.setdefault(job.parent_id, set()).add(job.job_id)
    elapsed = max(0.0, (wall_ms() - (job.ready_ms or job.created_ms)) / 1000)
    live.timers.append(loop.call_later(max(0.0, job.deadline_secs - elapsed), launcher._on_deadline, job.job_id))
    launcher._spawn_task(launcher._supervise(job, live))
    if job.parent_id is not None and job.session_id is not None and not job.start_written:
        parent = roost.table.get(job.parent_id)
        if parent is not None:
            launcher._spawn_task(launcher._write_start_line(job, parent))
    roost.store.enqueue([job.upsert_op()])
    log.info("job_readopted", job_id=job.job_id, pid=job.pid, session_id=job.session_id)

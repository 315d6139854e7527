"""Bounded state: what has ended is forgotten on a documented schedule, while the daemon runs.

A host daemon runs for months; without this, every session, job and spent approval id ever
written stays in memory and in SQLite, and a restart pays for all of them. The sweep runs every
``retention_sweep_secs`` whether or not requests come (an idle daemon is pruned too):

* ended sessions leave memory ``session_memory_secs`` after they end (``/status`` and the admin
  API stop showing them) and the database ``retention_secs`` after they end, except those an
  unfinished job still names (its child's, whose end says how the job ended, and its parent's);
* finished jobs leave the database ``retention_secs`` after they end (memory keeps a bounded
  number of them already), and with them the directory the daemon made for a top-level job
  launched without a workdir (``<state_dir>/jobs/<job_id>``) and the directory it made for each
  delegated child (``<parent's workdir>/.murmur/children/<name>-<16 hex>``, even in a workdir
  the caller named: children end before, or with, the job that delegated to them, so they go no
  later than it does; :mod:`roost.services.launcher.jobdirs`);
* spent approval ids are kept exactly while their approval could still be presented (until its
  expiry), in memory and on disk;
* reservation-journal rows go once every slot in them has expired;
* the WAL is checkpointed, and ``journal_size_limit`` truncates it back after each checkpoint.

Database deletes run in batches, one short transaction each, through the one executor.
docs/operations.md ("Retention") lists the settings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Container, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from roost.services.periodic import every
from roost.state.repos.jobs import prune_sql as prune_jobs
from roost.state.repos.journal import JournalRepository
from roost.state.repos.sessions import prune_sql as prune_sessions
from roost.state.repos.spent import prune_sql as prune_spent
from roost.state.sessions import SessionTable
from roost.state.settings import Settings
from roost.state.store import Op

__all__ = ["BATCH", "PrunedStore", "Retention", "SweepCounts"]

log = structlog.get_logger("roost.retention")

# Rows deleted per statement: one sweep's transaction stays short even after a long outage.
BATCH = 5_000

PRUNE_SESSIONS = prune_sessions(BATCH)
PRUNE_JOBS = prune_jobs(BATCH)
PRUNE_SPENT = prune_spent(BATCH)


@dataclass(frozen=True, slots=True)
class SweepCounts:
    sessions_forgotten: int  # left memory
    sessions_deleted: int
    jobs_deleted: int
    spent_deleted: int
    job_dirs_removed: int = 0  # the daemon's own directories of deleted jobs (top-level and delegated)

    @property
    def any(self) -> bool:
        return bool(self.sessions_forgotten or self.sessions_deleted or self.jobs_deleted or self.spent_deleted)


class PrunedStore(Protocol):
    """What the sweep needs of the store: batched deletes and a checkpoint."""

    async def prune_rows(self, ops: Sequence[Op]) -> list[tuple[int, list[tuple[Any, ...]]]]: ...

    async def checkpoint(self) -> None: ...


class Retention:
    """The periodic sweep; :meth:`sweep` is one pass (tests call it directly)."""

    def __init__(
        self,
        *,
        settings: Settings,
        table: SessionTable,
        store: PrunedStore,
        clock: Callable[[], int],
        named: Callable[[], Container[str]] = frozenset,
        job_dirs: Callable[[list[tuple[str, str, str | None]]], Awaitable[int]] | None = None,
    ) -> None:
        self._settings = settings
        self._table = table
        self._store = store
        self._clock = clock
        # The sessions unfinished jobs name, which stay in memory whatever their age (the
        # database keeps them too: the prune spares what start-up would load as live).
        self._named = named
        # Removes the daemon's own directory of each pruned job (roost/services/launcher/jobdirs.py).
        self._job_dirs = job_dirs
        self.last: SweepCounts | None = None

    async def run_forever(self) -> None:
        """Sweep every ``retention_sweep_secs``; a failed sweep is logged and the next one runs."""
        await every(
            lambda: self._settings.config.retention_sweep_secs,
            self.sweep,
            failed="retention_sweep_failed",
            logger="roost.retention",
        )

    async def sweep(self) -> SweepCounts:
        cfg = self._settings.config
        now = self._clock()
        table = self._table
        table.prune(now)
        table.forget_spent(now)
        forgotten = table.forget_ended(now - int(cfg.session_memory_secs * 1000), self._named())
        history_cutoff = now - int(cfg.retention_secs * 1000)
        totals = [0, 0, 0]
        ops: list[Op] = [(PRUNE_SESSIONS, (history_cutoff,)), (PRUNE_JOBS, (history_cutoff,)), (PRUNE_SPENT, (now,))]
        dirs = 0
        while ops:
            results = await self._store.prune_rows([*ops, JournalRepository.compact_op(now)])
            again: list[Op] = []
            for op, (count, rows) in zip(ops, results, strict=False):
                slot = [PRUNE_SESSIONS, PRUNE_JOBS, PRUNE_SPENT].index(op[0])
                totals[slot] += count
                if op[0] == PRUNE_JOBS and rows and self._job_dirs is not None:
                    dirs += await self._job_dirs([(str(r[0]), str(r[1]), r[2] if len(r) > 2 else None) for r in rows])
                if count >= BATCH:
                    again.append(op)
            ops = again
            if ops:
                await asyncio.sleep(0)  # let requests in between batches
        await self._store.checkpoint()
        self.last = SweepCounts(forgotten, totals[0], totals[1], totals[2], dirs)
        if self.last.any:
            log.info(
                "retention_swept",
                sessions_forgotten=forgotten,
                sessions_deleted=totals[0],
                jobs_deleted=totals[1],
                spent_deleted=totals[2],
                job_dirs_removed=dirs,
            )
        return self.last

"""The directories the daemon made for top-level jobs (``<state_dir>/jobs/<job_id>``), removed
with their job's row when retention forgets it.

A top-level job launched without a ``workdir`` runs in a directory of the daemon's own under the
state dir; its input, ``out/``, completion, trace and stdout are there. Without this the rows go
after ``retention_secs`` and the directories stay for good, so the disk under the state dir
would still grow with history. Only that exact path is ever removed (never a workdir a caller
named, never through a link), and only once the job is finished and past retention.
"""

from __future__ import annotations

import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

import structlog

from roost.core.ids import JOB_ID_RE
from roost.system.blocking import BlockingExecutor

__all__ = ["JobDirs"]

log = structlog.get_logger("roost.retention")


class JobDirs:
    """Removes the daemon's own job directories under ``<state_dir>/jobs``."""

    def __init__(self, state_dir: Path, executor: BlockingExecutor) -> None:
        self.root = state_dir / "jobs"
        self._executor = executor

    async def remove(self, jobs: Iterable[tuple[str, str]]) -> int:
        """Remove the directory of each ``(job_id, workdir)`` whose workdir is the daemon's own
        ``<state_dir>/jobs/<job_id>``; return how many went."""
        mine = [job_id for job_id, workdir in jobs if JOB_ID_RE.match(job_id) and workdir == str(self.root / job_id)]
        if not mine:
            return 0
        return await self._executor.run(self._remove_sync, mine)

    def _remove_sync(self, job_ids: list[str]) -> int:
        if not shutil.rmtree.avoids_symlink_attacks:
            # Without directory descriptors rmtree could follow a link planted inside: keep all.
            log.warning("job_dirs_not_removed", count=len(job_ids), error="rmtree is not link-safe here")
            return 0
        removed = 0
        for job_id in job_ids:
            path = self.root / job_id
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue  # never made here (a job on another node), or already gone
            except OSError as exc:
                log.warning("job_dir_not_removed", job_id=job_id, error=type(exc).__name__)
                continue
            if not stat.S_ISDIR(st.st_mode):
                log.warning("job_dir_not_removed", job_id=job_id, error="not a directory")
                continue
            try:
                shutil.rmtree(path)
            except OSError as exc:
                log.warning("job_dir_not_removed", job_id=job_id, error=type(exc).__name__)
                continue
            removed += 1
        return removed

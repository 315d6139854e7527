"""The directories the daemon made for jobs, removed with their job's row when retention forgets it.

A top-level job launched without a ``workdir`` runs in a directory of the daemon's own under the
state dir (``<state_dir>/jobs/<job_id>``); a delegated child runs in one the daemon made under its
parent's workdir (``<parent>/.murmur/children/<name>-<16 hex>``), whoever named that workdir. Its
input, ``out/``, completion, trace and stdout are there. Without this the rows go after
``retention_secs`` and the directories stay for good, so disks would still grow with history.
Only those exact paths are ever removed (never a workdir a caller named, never through a link:
a child's is reached beneath its parent's workdir one component at a time, ``O_NOFOLLOW``), and
only once the job is finished and past retention.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

import structlog

from roost.core.ids import JOB_ID_RE
from roost.system.blocking import BlockingExecutor
from roost.system.fsutil import open_beneath

__all__ = ["JobDirs", "child_dir_name"]

_CHILD_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}-[0-9a-f]{16}$")


def child_dir_name(workdir: str, parent: str | None) -> str | None:
    """The ``<name>-<16 hex>`` of a delegated child's directory the daemon made under
    ``<parent>/.murmur/children``; None for any other path."""
    if not parent:
        return None
    where = Path(workdir)
    if where.parent != Path(parent) / ".murmur" / "children" or not _CHILD_NAME.match(where.name):
        return None
    return where.name


def _remove_children(children: list[tuple[str, str]]) -> int:
    """Blocking: remove each child directory beneath its parent's workdir, following no link."""
    if not shutil.rmtree.avoids_symlink_attacks:
        return 0
    removed = 0
    for parent, name in children:
        try:
            fd = open_beneath(parent, (".murmur", "children"))
        except OSError:
            continue  # the parent's workdir is gone, or was replaced by something with a link
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                continue
            shutil.rmtree(name, dir_fd=fd)
            removed += 1
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("child_dir_not_removed", name=name, error=type(exc).__name__)
        finally:
            os.close(fd)
    return removed


log = structlog.get_logger("roost.retention")


class JobDirs:
    """Removes the daemon's own job directories under ``<state_dir>/jobs``."""

    def __init__(self, state_dir: Path, executor: BlockingExecutor) -> None:
        self.root = state_dir / "jobs"
        self._executor = executor

    async def remove(self, jobs: Iterable[tuple[str, str, str | None]]) -> int:
        """Remove the directory of each ``(job_id, workdir, parent_workdir)`` the daemon made:
        ``<state_dir>/jobs/<job_id>``, or a child's under its parent's workdir; how many went."""
        jobs = list(jobs)
        mine = [j for j, workdir, _ in jobs if JOB_ID_RE.match(j) and workdir == str(self.root / j)]
        children = [(parent, name) for _, workdir, parent in jobs if (name := child_dir_name(workdir, parent))]
        if not mine and not children:
            return 0
        removed = await self._executor.run(self._remove_sync, mine) if mine else 0
        if children:
            removed += await self._executor.run(_remove_children, [(p, n) for p, n in children if p is not None])
        return removed

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

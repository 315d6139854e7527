"""A Ray child's directory and its records, read and written through its node's keeper.

Why its own module: nodes share no filesystem, so the child's directory (its workdir, log,
completion record, trace lines and files) lives under the keeper's root on the child's node and
is reached only through that keeper (roost/backends/ray/node/files.py does the work there). A
node that dies takes its directories with it: the launcher's record of how such a child ended
(``completion.json``) is then kept by the daemon under ``<state_dir>/ray-lost/<job_id>/`` — the
only record of that delegation, written once like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import structlog
from ray.exceptions import RayError

from roost.backends.base import BackendError, ChildDir, ChildDirError
from roost.backends.ray.keepers import Keepers, cause
from roost.backends.ray.placer import Placer
from roost.core.errors import Unavailable
from roost.services.completionfile import CompletionRecord, read_completion, write_completion
from roost.system.blocking import BlockingExecutor
from roost.system.workdirs import from_verdict

__all__ = ["RayChildDirs"]

log = structlog.get_logger("roost.ray")


class RayChildDirs:
    """The :class:`roost.backends.base.ProcessBackend` directory methods for Ray children."""

    def __init__(self, keepers: Keepers, placer: Placer, executor: BlockingExecutor, lost_root: Path) -> None:
        self.keepers = keepers
        self.placer = placer
        self.executor = executor
        self.lost_root = lost_root

    async def _keeper(self, dir: ChildDir) -> Any:
        return await self.keepers.at(self.placer.node(dir.node, dir.job_id))

    async def prepare_dir(self, dir: ChildDir, task: dict[str, str | None] | None) -> ChildDir:
        node = self.placer.node(dir.node, dir.job_id)
        try:
            keeper = await self.keepers.at(node)
            workdir = str(await self.keepers.call(keeper.prepare, dir.job_id, dir.uid, task))
        except RayError as exc:
            raise ChildDirError(cause(exc)) from None
        return replace(dir, workdir=workdir, parent_workdir=None, node=node)

    def _lost_dir(self, job_id: str) -> Path:
        return self.lost_root / job_id

    async def read_completion(self, dir: ChildDir) -> CompletionRecord | None:
        local = await self.executor.run(read_completion, self._lost_dir(dir.job_id))
        if local is not None:
            return local
        try:
            keeper = await self._keeper(dir)
            raw = await self.keepers.call(keeper.read_completion, dir.job_id, dir.uid)
        except (RayError, BackendError):
            return None
        return CompletionRecord.from_dict(raw) if isinstance(raw, dict) else None

    async def write_completion(self, dir: ChildDir, rec: CompletionRecord) -> None:
        try:
            keeper = await self._keeper(dir)
            await self.keepers.call(keeper.write_completion, dir.job_id, dir.uid, rec.to_dict())
            return
        except (RayError, BackendError) as exc:
            log.warning("ray_completion_kept_locally", job_id=dir.job_id, error=cause(exc))

        def keep() -> None:
            path = self._lost_dir(dir.job_id)
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_completion(path, rec)

        await self.executor.run(keep)

    async def stderr_tail(self, dir: ChildDir) -> list[str]:
        try:
            keeper = await self._keeper(dir)
            return list(await self.keepers.call(keeper.stderr_tail, dir.job_id, dir.uid))
        except (RayError, BackendError):
            return []

    async def own_session_end(self, dir: ChildDir, session_id: str) -> str | None:
        try:
            keeper = await self._keeper(dir)
            told = await self.keepers.call(keeper.own_session_end, dir.job_id, dir.uid, session_id)
        except (RayError, BackendError):
            return None
        return told if isinstance(told, str) else None

    async def append_log(self, dir: ChildDir, lines: Sequence[str]) -> None:
        try:
            keeper = await self._keeper(dir)
            await self.keepers.call(keeper.append_log, dir.job_id, dir.uid, list(lines))
        except (RayError, BackendError) as exc:
            raise OSError(cause(exc)) from None

    async def read_log(self, dir: ChildDir, offset: int) -> bytes:
        """The child's log from ``offset`` (``roostctl logs -f`` for a remote child)."""
        try:
            keeper = await self._keeper(dir)
            return bytes(await self.keepers.call(keeper.read_log, dir.job_id, dir.uid, offset))
        except (RayError, BackendError):
            return b""

    async def append_trace(
        self, dir: ChildDir, session_id: str, lines: Sequence[tuple[str, dict[str, object]]]
    ) -> list[str]:
        """The daemon's trace lines for a session on a node, written there by its keeper."""
        try:
            keeper = await self._keeper(dir)
            ids = await self.keepers.call(keeper.append_trace, dir.job_id, dir.uid, session_id, list(lines))
        except (RayError, BackendError) as exc:
            raise OSError(cause(exc)) from None
        return [str(i) for i in ids]

    async def read_file(self, dir: ChildDir, name: str, offset: int, max_bytes: int) -> tuple[int, bytes]:
        try:
            keeper = await self._keeper(dir)
            start, data = await self.keepers.call(keeper.read_file, dir.job_id, dir.uid, name, offset, max_bytes)
        except (RayError, BackendError, ValueError):
            return 0, b""
        return int(start), bytes(data)

    async def list_files(self, dir: ChildDir, sub: str) -> list[str]:
        try:
            keeper = await self._keeper(dir)
            return [str(n) for n in await self.keepers.call(keeper.list_files, dir.job_id, dir.uid, sub)]
        except (RayError, BackendError, ValueError):
            return []

    async def check_workdir(self, dir: ChildDir, workdir: str, uid: int | None) -> str:
        """Checked by the node's keeper on the node's own disk, where the child runs."""
        node = self.placer.node(dir.node, dir.job_id)
        try:
            keeper = await self.keepers.at(node)
            verdict = await self.keepers.call(keeper.check_workdir, dir.job_id, workdir, uid)
        except (RayError, BackendError) as exc:
            raise Unavailable(
                f"the workdir could not be checked on Ray node {node.node_id}, where the session runs: {cause(exc)}"
            ) from None
        return from_verdict(verdict)

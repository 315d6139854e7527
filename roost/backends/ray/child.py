"""``RayChild``: one child on a Ray node, as the launcher supervises it.

Why its own module: the launcher holds a :class:`roost.backends.base.ChildHandle` for each
child it runs and never asks where the child is; for a Ray child each of the handle's waits and
signals is a call to the keeper on the child's node, and a keeper that dies fails them, so the
child's exit sentence then says whether its node died or only the keeper did
(:meth:`roost.backends.ray.keepers.Keepers.gone_sentence`).
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from ray.exceptions import RayActorError, RayError

from roost.backends.base import ChildRef, NodeRef
from roost.backends.ray.keepers import Keepers

__all__ = ["RayChild"]


class RayChild:
    """A child on a Ray node, as the launcher supervises it (a :class:`ChildHandle`)."""

    def __init__(
        self, keepers: Keepers, keeper: Any, ref: ChildRef, *, ready_bound: float, adopted: bool = False
    ) -> None:
        assert ref.node is not None and ref.pid is not None
        self.job_id = ref.job_id
        self.pid = ref.pid
        self.pid_start = ref.pid_start
        self.node: NodeRef | None = ref.node
        self._node = ref.node
        self._keepers = keepers
        self._keeper = keeper
        self._ready_bound = ready_bound
        self._read_first = not adopted
        loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[str] = loop.create_future()
        self._watch = loop.create_task(self._wait_exit())

    @property
    def exited(self) -> asyncio.Future[str]:
        return self._exited

    @property
    def alive(self) -> bool:
        return not self._exited.done()

    @property
    def ref(self) -> ChildRef:
        return ChildRef(self.job_id, self.pid, self.pid_start, self._node)

    async def _wait_exit(self) -> None:
        try:
            status = str(await self._keepers.call(self._keeper.wait_exit, self.job_id))
        except RayActorError as exc:
            status = await self._keepers.gone_sentence(self._node, exc)
        except (RayError, KeyError) as exc:
            # The keeper no longer knows the child (it was started again meanwhile).
            status = f"exit status unknown: the node keeper lost track of the child ({type(exc).__name__})"
        if not self._exited.done():
            self._exited.set_result(status)

    async def readline(self) -> bytes:
        """The ready line (the keeper reads it); later stdout lines the keeper logs itself."""
        if not self._read_first:
            return b""
        self._read_first = False
        try:
            line, _why = await self._keepers.call(self._keeper.wait_ready, self.job_id, self._ready_bound)
        except RayError:
            return b""
        if line is None:
            return b""
        return str(line).encode("utf-8")

    async def stop(self, grace: float) -> bool:
        if not self.alive:
            return False
        try:
            killed = bool(await self._keepers.call(self._keeper.stop, self.job_id, grace))
        except RayError:
            killed = False
        await asyncio.shield(self._exited)
        return killed

    def kill(self) -> None:
        if self.alive:
            self._keepers.submit(self._keeper.signal, self.job_id, int(signal.SIGKILL))

    def close(self) -> None:
        if not self._watch.done():
            self._watch.cancel()

"""A capsule's artifact, in the cache of the node a child of it is about to start on.

Why its own module: nodes share no filesystem, so before a keeper can start a child it needs
the capsule's artifact in its own cache (roost/backends/ray/node/cache.py), pinned by sha256.
The keeper fetches it from the daemon (``GET /artifacts/{sha256}`` with a node keeper's token)
when the daemon says where it is reached; a backend used on its own sends the bytes itself.
Each node and digest is seen to once, however many launches wait for it at the same time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roost.backends.base import NodeRef, StartSpec
from roost.backends.ray.keepers import Keepers
from roost.system.blocking import BlockingExecutor

__all__ = ["NodeArtifacts"]


class NodeArtifacts:
    """Sees that a node's keeper has an artifact in its cache before a child of it starts."""

    def __init__(
        self,
        keepers: Keepers,
        executor: BlockingExecutor,
        registry_path: Path,
        *,
        daemon_url: Callable[[], str] | None,
        keeper_token: Callable[[str], str] | None,
    ) -> None:
        self.keepers = keepers
        self.executor = executor
        self.registry_path = registry_path
        # The daemon's URL as other nodes reach it (advertise_url), and a node keeper's token for
        # GET /artifacts/{sha256}; without them (a backend used on its own) the daemon sends the bytes.
        self.daemon_url = daemon_url
        self.keeper_token = keeper_token
        self._puts: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def ensure(self, keeper: Any, node: NodeRef, capsule: str, sha256: str) -> None:
        """Once per node and digest (concurrent launches share one fetch): the node's cache has it."""
        key = (node.node_id, sha256)
        task = self._puts.get(key)
        if task is None or (task.done() and task.exception() is not None):
            task = asyncio.get_running_loop().create_task(self._put(keeper, node, capsule, sha256))
            self._puts[key] = task
        await asyncio.shield(task)

    async def _put(self, keeper: Any, node: NodeRef, capsule: str, sha256: str) -> None:
        name, version = capsule.split("@", 1)
        if await self.keepers.call(keeper.has_artifact, name, version, sha256):
            return
        if self.daemon_url is not None and self.keeper_token is not None:
            token = self.keeper_token(node.node_id)
            await self.keepers.call(keeper.fetch_artifact, name, version, sha256, self.daemon_url(), token)
            return
        from roost.state.registry import artifact_filename

        path = self.registry_path / name / version / artifact_filename(name, version)
        data = await self.executor.run(path.read_bytes)
        await self.keepers.call(keeper.put_artifact, name, version, sha256, data)

    async def sha256_of(self, spec: StartSpec) -> str:
        """The digest the start spec pins, else the registry's for its capsule."""
        if spec.sha256:
            return spec.sha256
        from roost.state.registry import Registry

        name, version = spec.capsule.split("@", 1)
        artifact = await self.executor.run(Registry(self.registry_path).resolve, name, version)
        return artifact.sha256

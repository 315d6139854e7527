"""The referee's memory of registry answers: each ``name@version`` resolved at most once per window.

The registry revalidates an artifact against its file's stat on every call; doing that (a
thread hop) on every ``POST /spawn`` would cost more than the rest of the referee together. So
an answer is reused for ``registry_recheck_secs``: a replaced artifact is noticed within that
window, and the launcher re-hashes what it unpacks, so bytes that were never approved are never
run. Past half the window a revalidation starts in the background (refresh-ahead), so under
steady load no request waits on the registry; when the window does lapse, every request that
finds it lapsed waits for the one revalidation already in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from roost.core.envelope import Envelope
from roost.state.registry import Artifact, Registry, RegistryError
from roost.system.blocking import BlockingExecutor

__all__ = ["ArtifactCache"]

Key = tuple[str, str]
MAX_ENTRIES = 4096


class ArtifactCache:
    """Resolutions (and each artifact's envelope) for one referee.

    ``registry`` and ``window`` are read at each use, so a reload that swaps the registry or
    changes ``registry_recheck_secs`` takes effect without rebuilding the cache.
    """

    def __init__(
        self, registry: Callable[[], Registry], executor: BlockingExecutor, window: Callable[[], float]
    ) -> None:
        self.registry = registry
        self.executor = executor
        self.window = window
        self.resolved: dict[Key, tuple[Artifact, float]] = {}
        self.resolving: dict[Key, asyncio.Future[Artifact]] = {}
        self._generation = 0
        self._envelopes: dict[str, Envelope] = {}

    def fresh(self, name: str, version: str) -> Artifact | None:
        """The cached resolution if it was checked within the window (no await), else None."""
        key = (name, version)
        hit = self.resolved.get(key)
        if hit is None:
            return None
        age = time.monotonic() - hit[1]
        window = self.window()
        if age >= window:
            return None
        if age >= window / 2 and key not in self.resolving:
            self._fly(key)
        return hit[0]

    async def resolve(self, name: str, version: str) -> Artifact:
        """Resolve through the executor, reusing an answer checked within the window."""
        key = (name, version)
        hit = self.resolved.get(key)
        if hit is not None and time.monotonic() - hit[1] < self.window():
            return hit[0]
        flight = self.resolving.get(key) or self._fly(key)
        return await asyncio.shield(flight)

    def _fly(self, key: Key) -> asyncio.Task[Artifact]:
        flight = self.resolving[key] = asyncio.get_running_loop().create_task(self._revalidate(key, self._generation))
        # A refresh nobody awaits must not warn "exception never retrieved"; a waiter still
        # gets the error from the task itself.
        flight.add_done_callback(lambda t: None if t.cancelled() else t.exception())
        return flight

    async def _revalidate(self, key: Key, generation: int) -> Artifact:
        now = time.monotonic()
        try:
            artifact = await self.executor.run(self.registry().resolve, *key)
        except RegistryError:
            self.resolved.pop(key, None)
            raise
        finally:
            if self.resolving.get(key) is asyncio.current_task():
                del self.resolving[key]
        if generation != self._generation:
            return artifact  # forgotten while in flight: answer this caller, cache nothing
        if len(self.resolved) > MAX_ENTRIES:
            self.resolved.clear()
        self.resolved[key] = (artifact, now)
        return artifact

    def envelope_of(self, artifact: Artifact) -> Envelope:
        """The artifact's envelope, lowered from its manifest once per digest."""
        env = self._envelopes.get(artifact.sha256)
        if env is None:
            if len(self._envelopes) > MAX_ENTRIES:
                self._envelopes.clear()
            env = self._envelopes[artifact.sha256] = Envelope.from_manifest(artifact.manifest)
        return env

    def forget(self) -> None:
        """Drop every cached resolution; answers still in flight are given but not kept."""
        self._generation += 1
        self.resolved.clear()
        self.resolving.clear()

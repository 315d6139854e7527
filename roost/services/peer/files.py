"""The session-files port: where the peer plane reads a session's exports and stores its fetches.

Why a port: a session's workdir is on the daemon's own disk for a local child, but on another
machine for a child of the Ray backend, where only that node's keeper can open it. The mint,
redeem and fetch steps keep every check that is about the *handle* (shape, MAC, audience,
expiry, policy) and ask this port for what is about the *files*: the mint-time check of a path,
an open exported file to serve, and an atomic sink under ``peer-in/``. Whichever side does the
file work applies the same path rules and descriptor walk (:mod:`roost.services.peer.reading`), on the
machine the files are on. The daemon composes the implementation: this host's
(:mod:`roost.backends.local.sessionfiles`), or one that routes each session to its node
(roost/backends/ray/peerfiles.py).

Every method raises a :class:`roost.services.peer.errors.PeerError` for a refusal about the file; a
sink raises :class:`OSError` (its errno is what the fetcher is told).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from roost.services.peer.reading import SmallBody
from roost.services.peer.resolve import follows_links, root_components
from roost.state.sessions import SessionRecord

__all__ = ["Export", "LargeBody", "PeerInSink", "SessionFiles", "SmallBody", "export_of"]


@dataclass(frozen=True, slots=True)
class Export:
    """Where a session's exported files are and how they are read (from its record and manifest)."""

    workdir: str
    root: tuple[str, ...]
    max_bytes: int
    uid: int | None
    follow: bool
    workdir_id: tuple[int, int] | None = None
    """(dev, inode) of the workdir as registered, when it is on this host (re-verified on each walk)."""


def export_of(rec: SessionRecord) -> Export | None:
    """The session's export, or ``None`` when it declares no peer plane or registered no workdir."""
    plane = rec.manifest.exports.peer_files
    if plane is None or rec.workdir is None:
        return None
    return Export(
        rec.workdir,
        root_components(plane.root),
        plane.max_bytes,
        rec.uid,
        follows_links(rec.containment),
        rec.workdir_id,
    )


class LargeBody(Protocol):
    """An exported file too large to read whole: opened, then hashed, sent and closed."""

    @property
    def size(self) -> int: ...

    @property
    def mtime_ms(self) -> int: ...

    async def sha256(self) -> str:
        """The hash of exactly ``size`` bytes; :class:`IoError` if the file changed meanwhile."""

    async def send(self, request: web.Request, resp: web.StreamResponse) -> bool:
        """Send the bytes on the prepared ``resp``; ``False`` if the file changed while sent or
        its source stopped answering (the caller then aborts the connection)."""

    async def close(self) -> None:
        """Release the open file (always called, whatever happened)."""


class PeerInSink(Protocol):
    """One atomic write into a session's ``peer-in/``: open → write… → commit, or abort."""

    async def open(self) -> None: ...

    async def write(self, data: bytes) -> None: ...

    async def commit(self, name: str) -> None:
        """Make the bytes visible as ``peer-in/<name>`` at once (rename over a temp file)."""

    async def abort(self) -> None:
        """Remove the temp file, if any; never raises."""


class SessionFiles(Protocol):
    async def mint_target(self, rec: SessionRecord, export: Export, components: tuple[str, ...]) -> tuple[str, ...]:
        """Mint-time check; the components the handle names (a followed link's target)."""

    async def open_export(
        self, rec: SessionRecord, export: Export, components: tuple[str, ...]
    ) -> SmallBody | LargeBody:
        """Redeem-time open: a small file read and hashed, or a large one left open."""

    def peer_in(self, rec: SessionRecord, workdir: str) -> PeerInSink:
        """A sink for one fetched file in ``<workdir>/peer-in/``."""

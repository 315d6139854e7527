"""Peer-plane helpers: sessions registered over HTTP, each with a real A2A door.

:class:`PeerEnv` registers sessions with a workdir and a ``capsule_url`` pointing at a real
:class:`a2a.door.Door` (which serves the agent card the audience is read from), and mints,
redeems and fetches handles through the daemon's HTTP API.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from a2a.door import Door, DoorTask, TaskOutcome
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder

__all__ = [
    "CAPS",
    "NOT_VALID",
    "PLANE",
    "SECRET",
    "TOKEN_RE",
    "PeerEnv",
    "Session",
    "peer_env",
    "peer_registry",
    "trace_events",
]

TOKEN_RE = re.compile(r"(mh1|msc1|msa1|mnk1|mra1)\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
SECRET = b"TOP-SECRET-outside-the-root-4f1c9a"

PLANE = {"peer_files": {"root": "share", "max_ttl": 900}}
CAPS = {"network": {"allow": ["127.0.0.1"]}, "peer_fetch": {"allow": ["127.0.0.1"]}}
NOT_VALID = {"error": "handle_not_valid", "message": "the handle is not valid for this capsule"}
"""The one body of every MAC-class redeem refusal."""


def trace_events(workdir: Path, sid: str, event_type: str) -> list[dict[str, Any]]:
    """The lines of one type in a session's ``trace.jsonl`` (none when it has no trace yet)."""
    path = workdir / ".murmur" / sid / "trace.jsonl"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line["event_type"] == event_type]


@dataclass
class Session:
    sid: str
    credential: str
    workdir: Path
    door_url: str
    name: str

    @property
    def audience(self) -> str:
        return f"{self.name}@{self.door_url.removeprefix('http://')}".lower()

    @property
    def cred(self) -> dict[str, str]:
        return {"x-murmur-spawn-credential": self.credential}


@dataclass
class PeerEnv:
    daemon: RunningDaemon
    root: Path
    runners: list[web.AppRunner] = field(default_factory=list)

    async def door(self, name: str, sid: str) -> str:
        async def runner(_task: DoorTask) -> TaskOutcome:
            return TaskOutcome.completed("ok")

        door = Door(name=name, version="0.1.0", session_id=sid, runner=runner)
        app_runner = web.AppRunner(door.app, access_log=None)
        await app_runner.setup()
        site = web.TCPSite(app_runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        url = door.url = f"http://127.0.0.1:{port}"
        self.runners.append(app_runner)
        return url

    async def session(self, name: str = "alpha", *, capsule_url: bool = True, workdir: bool = True) -> Session:
        sid = f"ses_{os.urandom(8).hex()}"
        wd = self.root / sid
        (wd / "share").mkdir(parents=True)
        url = await self.door(name, sid)
        extra: dict[str, Any] = {}
        if workdir:
            extra["workdir"] = str(wd)
        if capsule_url:
            extra["capsule_url"] = url
        _, cred = await self.daemon.register_top(name, session_id=sid, **extra)
        return Session(sid, cred, wd, url, name)

    async def mint(self, s: Session, path: str, peer: Session | str, **extra: Any) -> tuple[int, Any]:
        peer_url = peer if isinstance(peer, str) else peer.door_url
        status, body, _, _ = await self.daemon.call(
            "POST", "/handles", json={"path": path, "peer": peer_url, **extra}, headers=s.cred
        )
        return status, body

    async def redeem(self, handle: str, audience: str | None, method: str = "GET") -> tuple[int, Any, Any, bytes]:
        headers = {} if audience is None else {"x-murmur-audience": audience}
        return await self.daemon.call(method, f"/resources/peer/{handle}", headers=headers)

    async def fetch(self, s: Session, handle: str, peer: str | None = None, **extra: Any) -> tuple[int, Any]:
        body = {"peer": peer or self.daemon.url, "handle": handle, **extra}
        status, out, _, _ = await self.daemon.call("POST", "/peer-fetch", json=body, headers=s.cred)
        return status, out


@pytest.fixture
def peer_registry(registry: RegistryBuilder) -> RegistryBuilder:
    registry.add("alpha", capabilities=CAPS, extra={"exports": PLANE})
    registry.add("beta", capabilities=CAPS, extra={"exports": PLANE})
    registry.add("plain", capabilities=CAPS)  # no exports.peer_files
    registry.add("closed", capabilities={"network": {"allow": ["localhost"]}}, extra={"exports": PLANE})
    registry.add(
        "tiny",
        capabilities=CAPS,
        extra={"exports": {"peer_files": {"root": "share", "max_ttl": 60, "max_bytes": 1024}}},
    )
    return registry


@pytest.fixture
async def peer_env(daemon_factory: Any, peer_registry: RegistryBuilder, tmp_path: Path) -> AsyncIterator[PeerEnv]:
    d: RunningDaemon = await daemon_factory(
        peer_registry.root, spawn_allow=("alpha", "beta", "plain", "closed", "tiny")
    )
    env = PeerEnv(daemon=d, root=tmp_path / "work")
    env.root.mkdir()
    yield env
    for r in env.runners:
        await r.cleanup()

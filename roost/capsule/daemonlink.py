"""This session's standing with mur-roost: register once the door is bound, renew, deregister.

Registration is the launch's last check: a capsule that declares ``capabilities.spawn.allow``,
or that was delegated to, must be known to the daemon that referees its spawns, so a failed
``/register`` refuses the launch rather than run it unrefereed. The lease is renewed while the
session runs (harmless when roost watches the pid instead). The answer to ``/register`` carries
the key the session's door checks the daemon's seals with, and says whether the daemon's
launcher delivers this session's completion (docs/security.md, "Sealed origin and trust").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from dataclasses import dataclass

import aiohttp

from roost.capsule.prepare import LaunchRefused, Prepared, register_refusal, say
from roost.core.wire import APPROVAL_HEADER, CREDENTIAL_HEADER
from roost.system.tlsclient import TrustError, context_for, untrusted_sentence

__all__ = ["DaemonLink", "Registration"]

REGISTER_TIMEOUT = aiohttp.ClientTimeout(total=30, sock_connect=5)
DEREGISTER_TIMEOUT = aiohttp.ClientTimeout(total=5, sock_connect=2)
RENEW_TIMEOUT = aiohttp.ClientTimeout(total=10, sock_connect=2)


@dataclass(frozen=True, slots=True)
class Registration:
    """What ``/register`` told the session beyond its credential."""

    door_key: bytes | None = None
    """The key the door checks the daemon's seals with (None: believe no seal)."""
    launcher_delivers: bool = False
    """The daemon's launcher started this child and delivers its completion, sealed, after it
    exits; the child writes ``completion.json`` and does not post it itself."""


class DaemonLink:
    """The HTTP client side of one session's registration; ``credential`` is set once registered."""

    def __init__(self, p: Prepared) -> None:
        self.p = p
        self.credential: str | None = None
        self._http: aiohttp.ClientSession | None = None
        self._renewer: asyncio.Task[None] | None = None
        self._trust_error: str | None = None

    @property
    def http(self) -> aiohttp.ClientSession | None:
        """The client the session talks to the daemon with (its TLS trust set up), once open."""
        return self._http

    def open(self) -> None:
        """Create the HTTP client (on the running loop); an https daemon is verified with the
        system store plus ``MURMUR_ROOST_CA`` (docs/operations.md, "Network")."""
        try:
            tls = context_for(self.p.roost_url)
        except TrustError as exc:
            tls, self._trust_error = None, str(exc)  # refuses the registration, with this sentence
        self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls) if tls else None)

    async def register(self, capsule_url: str, *, required: bool) -> Registration:
        """Register the session; returns the door key and who delivers its completion.

        Raises :class:`LaunchRefused` when registration is ``required`` and fails.
        """
        p = self.p
        if p.roost_url is None:
            if required:
                raise LaunchRefused(register_refusal("<unset>", "MURMUR_ROOST_URL is not set"))
            return Registration()
        if self._trust_error is not None:
            raise LaunchRefused(register_refusal(p.roost_url, self._trust_error))
        body: dict[str, object] = {
            "containment": p.decision.achieved,
            "session_id": p.session_id,
            "name": p.manifest.name,
            "version": p.manifest.version,
            "workdir": str(p.workdir),
            "pid": os.getpid(),
            "capsule_url": capsule_url,
        }
        if p.formation_id is not None:
            body["formation_id"] = p.formation_id  # its children join it (roost/core/formation.py)
        headers = {APPROVAL_HEADER: p.approval} if p.approval else {}
        assert self._http is not None
        try:
            async with self._http.post(
                p.roost_url + "/register", json=body, headers=headers, timeout=REGISTER_TIMEOUT
            ) as resp:
                raw = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            reason = untrusted_sentence(exc, p.roost_url) or str(exc) or type(exc).__name__
            raise LaunchRefused(register_refusal(p.roost_url, reason)) from None
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if status != 200 or not isinstance(answer, dict) or not isinstance(answer.get("credential"), str):
            err = answer.get("error") if isinstance(answer, dict) else None
            reason = f"{status} {err}" if isinstance(err, str) else f"it answered HTTP {status}"
            raise LaunchRefused(register_refusal(p.roost_url, reason))
        self.credential = answer["credential"]
        door_key = answer.get("door_key")
        seal_key: bytes | None = None
        if isinstance(door_key, str) and len(door_key) == 64:
            with contextlib.suppress(ValueError):
                seal_key = bytes.fromhex(door_key)
        self._renewer = asyncio.get_running_loop().create_task(self._renew_forever())
        return Registration(seal_key, answer.get("completion_delivery") == "launcher")

    async def _renew_forever(self) -> None:
        """Renew this session's lease while it runs (harmless when roost watches the pid instead).

        The first call learns the lease's length; later ones come every third of it."""
        every = 0.0
        while self.credential is not None and self.p.roost_url is not None and self._http is not None:
            await asyncio.sleep(every)
            every = 60.0
            try:
                async with self._http.post(
                    self.p.roost_url + "/renew", headers={CREDENTIAL_HEADER: self.credential}, timeout=RENEW_TIMEOUT
                ) as resp:
                    answer = await resp.json(content_type=None) if resp.status == 200 else None
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
                continue
            secs = answer.get("lease_secs") if isinstance(answer, dict) else None
            if isinstance(secs, int | float) and secs > 0:
                every = max(1.0, secs / 3)

    async def deregister(self, outcome: str) -> None:
        if self.credential is None or self.p.roost_url is None or self._http is None:
            return
        try:
            async with self._http.post(
                self.p.roost_url + "/deregister",
                json={"outcome": outcome},
                headers={CREDENTIAL_HEADER: self.credential},
                timeout=DEREGISTER_TIMEOUT,
            ) as resp:
                await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            say(f"could not deregister from mur-roost at {self.p.roost_url}: {exc or type(exc).__name__}")

    def stop_renewing(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

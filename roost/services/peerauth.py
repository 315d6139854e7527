"""The relay's credentials for authenticated peers: secrets from files, OAuth tokens, cached.

Why in the daemon: capsules must never hold a peer's secret (roost/core/peerauth.py says which
entry a peer's card selects). This is the I/O around that choice:

* A secret file is read through the executor, refused unless it is a regular file owned by the
  daemon's user with no group or other permission bits (a secret any other user could read or
  swap is no secret). Its content is kept for :data:`SECRET_TTL_SECS` (so a rotated file is
  picked up).
* OAuth 2.0 client credentials (RFC 6749 §4.4): a ``POST`` to the configured token URL with
  ``grant_type=client_credentials`` and the configured scopes, the client authenticated with
  HTTP Basic (§2.3.1); never a redirect. The token is cached until :data:`REFRESH_MARGIN_SECS`
  before it expires, one fetch at a time per entry.
* No sentence, log line or exception names a secret or a token: only the file, the origin and
  the token URL.
"""

from __future__ import annotations

import asyncio
import base64
import os
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote_plus

import aiohttp
import structlog

from roost.core.errors import BadGateway
from roost.core.peerauth import PeerAuthEntry, select_entry
from roost.system.blocking import BlockingExecutor

__all__ = ["PeerAuth", "PeerAuthError"]

log = structlog.get_logger("roost.relay")

SECRET_TTL_SECS = 60.0
REFRESH_MARGIN_SECS = 30.0
DEFAULT_EXPIRES_SECS = 3600.0
TOKEN_TIMEOUT = aiohttp.ClientTimeout(total=15.0, sock_connect=5.0)
MAX_SECRET_BYTES = 16 * 1024


class PeerAuthError(BadGateway):
    """The configured credential could not be had (the relay answers 502 with the sentence)."""


def _read_secret(path: Path, uid: int) -> str:
    """Blocking: the secret in ``path``, checked to be the daemon's own and private to it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise PeerAuthError(f"cannot read the peer secret file {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PeerAuthError(f"the peer secret file {path} is not a regular file")
        if st.st_uid != uid or st.st_mode & 0o077:
            raise PeerAuthError(
                f"the peer secret file {path} must be owned by the daemon's user (uid {uid}) with mode 0600 "
                f"or stricter (it is uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o})"
            )
        data = os.read(fd, MAX_SECRET_BYTES + 1)
    finally:
        os.close(fd)
    text = data.decode("utf-8", "replace").strip()
    if not text or len(data) > MAX_SECRET_BYTES or any(c in text for c in "\r\n\0"):
        raise PeerAuthError(f"the peer secret file {path} must hold one line of at most {MAX_SECRET_BYTES} bytes")
    return text


def _basic(client_id: str, secret: str) -> str:
    """HTTP Basic client authentication as RFC 6749 §2.3.1 has it: each part form-urlencoded first."""
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}"
    return "Basic " + base64.b64encode(pair.encode()).decode("ascii")


class PeerAuth:
    """Headers that authenticate the relay to a peer, from the operator's ``peer_auth`` entries."""

    def __init__(self, entries: Sequence[PeerAuthEntry], executor: BlockingExecutor) -> None:
        self.entries = tuple(entries)
        self._executor = executor
        self._secrets: dict[Path, tuple[str, float]] = {}
        self._tokens: dict[PeerAuthEntry, tuple[str, float]] = {}
        self._fetching: dict[PeerAuthEntry, asyncio.Lock] = {}
        self._http: aiohttp.ClientSession | None = None
        self.token_fetches = 0

    async def headers(self, url: str, declared: frozenset[str]) -> dict[str, str]:
        """The headers for a request to ``url`` whose card declares ``declared`` schemes ({} when
        no configured entry is selected)."""
        if not self.entries:
            return {}
        entry = select_entry(self.entries, url, declared)
        if entry is None:
            return {}
        if entry.scheme == "api_key":
            assert entry.header is not None
            return {entry.header: await self._secret(entry.secret_file)}
        if entry.scheme == "bearer":
            return {"Authorization": f"Bearer {await self._secret(entry.secret_file)}"}
        return {"Authorization": f"Bearer {await self._token(entry)}"}

    async def _secret(self, path: Path) -> str:
        kept = self._secrets.get(path)
        now = time.monotonic()
        if kept is not None and kept[1] > now:
            return kept[0]
        secret = await self._executor.run(_read_secret, path, os.geteuid())
        self._secrets[path] = (secret, now + SECRET_TTL_SECS)
        return secret

    async def _token(self, entry: PeerAuthEntry) -> str:
        kept = self._tokens.get(entry)
        if kept is not None and kept[1] - REFRESH_MARGIN_SECS > time.monotonic():
            return kept[0]
        lock = self._fetching.setdefault(entry, asyncio.Lock())
        async with lock:
            kept = self._tokens.get(entry)  # re-checked: another request may have fetched it
            if kept is not None and kept[1] - REFRESH_MARGIN_SECS > time.monotonic():
                return kept[0]
            token, expires_in = await self._fetch_token(entry)
            self._tokens[entry] = (token, time.monotonic() + expires_in)
            return token

    async def _fetch_token(self, entry: PeerAuthEntry) -> tuple[str, float]:
        assert entry.token_url is not None and entry.client_id is not None
        secret = await self._secret(entry.secret_file)
        form = {"grant_type": "client_credentials"}
        if entry.scopes:
            form["scope"] = " ".join(entry.scopes)
        where = f"could not get a token for {entry.origin} from {entry.token_url}"
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(
                timeout=TOKEN_TIMEOUT, trust_env=False, cookie_jar=aiohttp.DummyCookieJar()
            )
        self.token_fetches += 1
        try:
            async with self._http.post(
                entry.token_url,
                data=form,
                allow_redirects=False,
                headers={"Accept": "application/json", "Authorization": _basic(entry.client_id, secret)},
            ) as resp:
                status = resp.status
                body = await resp.json(content_type=None) if status == 200 else None
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            raise PeerAuthError(f"{where}: {type(exc).__name__}") from None
        if status != 200:
            raise PeerAuthError(f"{where}: it answered {status}")
        token = body.get("access_token") if isinstance(body, dict) else None
        token_type = body.get("token_type", "bearer") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token or any(c in token for c in "\r\n\0"):
            raise PeerAuthError(f"{where}: the answer holds no usable access_token")
        if not isinstance(token_type, str) or token_type.lower() != "bearer":
            raise PeerAuthError(f"{where}: the token type is not bearer")
        expires = body.get("expires_in") if isinstance(body, dict) else None
        expires_in = float(expires) if isinstance(expires, int | float) and expires > 0 else DEFAULT_EXPIRES_SECS
        log.info("peer_token_fetched", origin=entry.origin, token_url=entry.token_url, expires_in=expires_in)
        return token, expires_in

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

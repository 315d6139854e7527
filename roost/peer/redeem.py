"""``GET /resources/peer/{handle}``: the check order, and serving the file without an oracle.

Check order (``docs/peer-plane.md``; upstream's, adapted to a daemon that serves many sessions on one port):

== ================================================================ ===========================
0  method ≠ GET (HEAD included) — before anything else               405 ``method_not_allowed``
1  empty token (``/resources/peer``, ``/resources/peer/``)           404 ``not_found``
2  token shape (``tokens.split``)                                    400 ``malformed_handle``
3  ``x-murmur-audience`` present, exactly once, non-empty after trim 400 ``missing_audience``
4  key: ``iss`` read from the *unverified* payload picks the session 403 ``handle_not_valid``
   (payload not JSON, no ``iss``, unknown or ended session — all
   collapse here: nothing about sessions leaks before the MAC)
5  constant-time HMAC over (payload segment, asserted audience)      403 ``handle_not_valid``
6  minting session declares ``exports.peer_files``                   404 ``no_peer_plane``
7  payload parses into exact types, ``v == 1``                       400 ``malformed_handle``
8  ``iss`` equals the session whose key verified (defence)           403 ``handle_not_valid``
9  ``exp > now``                                                     410 ``handle_expired``
10 ``p`` passes the pure rules, is opened by the descriptor walk,    404/403/413/500
   regular file, size ≤ ``max_bytes``
== ================================================================ ===========================

Why ``no_peer_plane`` moved after the MAC: upstream's listener belongs to one capsule, so
"this capsule has no plane" is a fact about the listener. Here one port serves every session
and the session is named by a caller-controlled ``iss``; answering ``no_peer_plane`` before the
MAC would tell anyone which session ids exist and which export files. Only a holder of a valid
MAC learns it (in practice never: a session without a plane cannot mint).

Trace records (``peer_handle_redeem``, minter's trace): every answer from check 2 on is
recorded in the trace of the running session the token's ``iss`` names, when there is one (so
probes against a session are visible to it, as upstream records them); ``path`` only once the
MAC verified; ``generation`` is always 0 — the daemon does not see a session's task
completions, and a number it made up would be mistaken for one.

Serving: bytes and ``etag`` always describe the same content. Files up to one chunk (64 KiB)
are read once into memory, hashed and sent. Larger files are hashed in a first pass over the
*same* descriptor (or the hash is taken from a cache keyed by the descriptor's (dev, ino,
size, mtime_ns, ctime_ns), so an unchanged file is hashed once), then sent with
``loop.sendfile`` from that descriptor; afterwards the descriptor is ``fstat``-ed again, and if
the file changed while it was sent the connection is aborted so the client sees a short body
(a transport error), never a complete 200 whose etag does not match.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import structlog
from aiohttp import web

from roost import tokens
from roost.events import ObservedError
from roost.http.middleware import json_error
from roost.ids import token_id
from roost.keys import KeyRing
from roost.peer import paths, span_attrs
from roost.peer.errors import (
    HandleExpired,
    HandleNotValid,
    IoError,
    MalformedHandle,
    MethodNotAllowed,
    MissingAudience,
    NoPeerPlane,
    NotFound,
    OutsideRoot,
    PeerError,
    TooLarge,
)
from roost.peer.resolve import OpenedFile, follows_links, open_export, root_components
from roost.sessions import SessionRecord
from roost.wire import AUDIENCE_HEADER

if TYPE_CHECKING:
    from roost.peer.context import PeerServices

__all__ = ["PREFIX", "SMALL_FILE", "EtagCache", "Verified", "claimed_session", "redeem", "verify"]

log = structlog.get_logger("roost.peer")

PREFIX: Final = "/resources/peer"
SMALL_FILE: Final = 64 * 1024
_HASH_CHUNK: Final = 1024 * 1024
MAX_AUDIENCE: Final = 512
"""Longest ``x-murmur-audience`` considered (``name@host:port``); a longer one is no audience."""


@dataclass(frozen=True, slots=True)
class Verified:
    """A handle that passed checks 2–9, with the components of its ``p`` (check 10's pure half)."""

    rec: SessionRecord
    claims: tokens.HandleClaims
    components: tuple[str, ...]


def _unverified_iss(payload: bytes) -> str | None:
    try:
        obj = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    iss = obj.get("iss") if isinstance(obj, dict) else None
    return iss if isinstance(iss, str) and iss else None


def claimed_session(token: str, lookup: Callable[[str], SessionRecord | None]) -> SessionRecord | None:
    """The running session a token's unverified ``iss`` names (only to choose a trace file)."""
    try:
        parts = tokens.split(token, tokens.HANDLE_TAG)
    except tokens.Malformed:
        return None
    iss = _unverified_iss(parts.payload_bytes)
    return lookup(iss) if iss is not None else None


def _verified_claimant(
    token: str, audience_values: list[str], lookup: Callable[[str], SessionRecord | None], keys: KeyRing
) -> SessionRecord | None:
    """The session a refused token names, only if its MAC verifies (so its trace may record it)."""
    rec = claimed_session(token, lookup)
    if rec is None or len(audience_values) != 1 or len(audience_values[0]) > MAX_AUDIENCE:
        return None
    try:
        parts = tokens.split(token, tokens.HANDLE_TAG)
    except tokens.Malformed:
        return None
    key = keys.handle_key(rec.session_id, rec.handle_salt)
    audience = audience_values[0].strip()
    return rec if tokens.mac_ok(key, tokens.HANDLE_DOMAIN, parts.payload_segment, parts.mac, audience) else None


def verify(
    token: str,
    audience_values: list[str],
    *,
    lookup: Callable[[str], SessionRecord | None],
    key_for: Callable[[SessionRecord], bytes],
    now_ms: int,
) -> Verified:
    """Checks 2–10 (pure half) in order; raise the :class:`PeerError` of the first that fails.

    ``lookup`` returns a *running* session or ``None``; ``audience_values`` are every
    ``x-murmur-audience`` header sent (more than one is as good as none: ambiguous).
    """
    try:
        parts = tokens.split(token, tokens.HANDLE_TAG)
    except tokens.Malformed:
        raise MalformedHandle() from None
    if len(audience_values) != 1 or not audience_values[0].strip() or len(audience_values[0]) > MAX_AUDIENCE:
        raise MissingAudience()
    audience = audience_values[0].strip()
    iss = _unverified_iss(parts.payload_bytes)
    rec = lookup(iss) if iss is not None else None
    if rec is None:
        raise HandleNotValid()
    if not tokens.mac_ok(key_for(rec), tokens.HANDLE_DOMAIN, parts.payload_segment, parts.mac, audience):
        raise HandleNotValid()
    if rec.manifest.exports.peer_files is None:
        raise NoPeerPlane()
    try:
        claims = tokens.parse_handle_payload(parts.payload_bytes)
    except tokens.Malformed:
        raise MalformedHandle() from None
    if claims.iss != rec.session_id:
        raise HandleNotValid()
    if claims.exp <= now_ms:
        raise HandleExpired()
    try:
        components = paths.handle_components(claims.p)
    except paths.PathRefused:
        raise OutsideRoot() from None
    return Verified(rec, claims, components)


class EtagCache:
    """sha256 by file identity (dev, ino, size, mtime_ns, ctime_ns); bounded LRU."""

    def __init__(self, maximum: int = 4096) -> None:
        self._max = maximum
        self._items: OrderedDict[tuple[int, int, int, int, int], str] = OrderedDict()

    def get(self, key: tuple[int, int, int, int, int]) -> str | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: tuple[int, int, int, int, int], value: str) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._max:
            self._items.popitem(last=False)


# -- blocking helpers (executor) ---------------------------------------------------------------


def _identity(fd: int) -> tuple[int, int, int, int, int]:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True, slots=True)
class SmallBody:
    """A small file read whole from one descriptor, with its hash and mtime."""

    data: bytes
    sha256: str
    mtime_ms: int


def _open_and_read(
    workdir: str,
    root: tuple[str, ...],
    components: tuple[str, ...],
    max_bytes: int,
    uid: int | None = None,
    follow: bool = False,
) -> SmallBody | OpenedFile:
    """One executor job for the common case: walk, open, and (small file) read + hash + close.

    A file of at most :data:`SMALL_FILE` bytes at open is read whole (bounded by ``max_bytes +
    1``: a file that grew past the ceiling is ``too_large``) and hashed from the very bytes that
    will be sent. A larger one is returned open for the streaming path.
    """
    opened = open_export(workdir, root, components, max_bytes, uid, follow=follow)
    if opened.size > SMALL_FILE:
        return opened
    try:
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(opened.fd, min(left, SMALL_FILE * 4))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(opened.fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise TooLarge(max_bytes)
    return SmallBody(data, hashlib.sha256(data).hexdigest(), opened.mtime_ms)


def _hash_fd(opened: OpenedFile) -> str | None:
    """sha256 of exactly ``opened.size`` bytes; ``None`` if the file changed while hashed."""
    h = hashlib.sha256()
    offset = 0
    while offset < opened.size:
        chunk = os.pread(opened.fd, min(_HASH_CHUNK, opened.size - offset), offset)
        if not chunk:
            return None
        h.update(chunk)
        offset += len(chunk)
    if os.pread(opened.fd, 1, offset) or _identity(opened.fd) != opened.identity:
        return None
    return h.hexdigest()


# -- the handler ---------------------------------------------------------------------------------


def _headers(handle_id: str) -> dict[str, str]:
    return {"x-murmur-handle-id": handle_id, "x-murmur-generation": "0"}


def _refusal(err: PeerError, handle_id: str | None) -> web.Response:
    headers = _headers(handle_id) if handle_id is not None else {}
    if isinstance(err, MethodNotAllowed):
        headers["allow"] = "GET"
    return json_error(err.status, err.coded().body(), headers)


def _category(err: PeerError) -> Any:
    if err.status in (401, 403):
        return "authorization"
    if err.status >= 500:
        return "unknown"
    return "validation"


async def redeem(plane: PeerServices, request: web.Request) -> web.StreamResponse:
    """Answer one redeem (any method: the 405 is decided here, before anything else)."""
    raw = request.rel_url.raw_path
    token = raw[len(PREFIX) + 1 :] if raw.startswith(PREFIX + "/") else ""
    if request.method != "GET":
        return _refusal(MethodNotAllowed(), None)
    if not token:
        return _refusal(NotFound(), None)
    handle_id = token_id(token)
    audience_values = request.headers.getall(AUDIENCE_HEADER, [])
    asserted = audience_values[0] if audience_values else None
    span = plane.events.start("roost.peer.redeem", **span_attrs({"roost.peer.handle_id": handle_id}))
    table = plane.table

    def lookup(sid: str) -> SessionRecord | None:
        return table.running_session(sid)

    def record(
        rec: SessionRecord | None,
        path: str | None,
        err: PeerError | None,
        size: int | None = None,
        sha: str | None = None,
    ) -> dict[str, object] | None:
        outcome = "ok" if err is None else err.code
        plane.metrics.handle_redemptions.labels(outcome=outcome).inc()
        if err is None:
            span.completed(**span_attrs({"roost.peer.outcome": "ok", "roost.peer.bytes": size}))
        else:
            span.failed(
                ObservedError(name=type(err).__name__, category=_category(err), code=err.code, status_code=err.status),
                **span_attrs({"roost.peer.outcome": outcome}),
            )
            log.info("peer_redeem_refused", handle_id=handle_id, outcome=outcome)
        if rec is None:
            return None
        return {
            "handle_id": handle_id,
            "path": path,
            "generation": 0,
            "audience_asserted": asserted,
            "bytes": size,
            "sha256": sha,
            "outcome": outcome,
            "reason": None if err is None else err.message,
        }

    async def refuse(rec: SessionRecord | None, path: str | None, err: PeerError) -> web.Response:
        payload = record(rec, path, err)
        if rec is not None and payload is not None:
            await plane.trace(rec, "peer_handle_redeem", payload)
        return _refusal(err, handle_id)

    try:
        v = verify(
            token,
            audience_values,
            lookup=lookup,
            key_for=lambda rec: plane.keys.handle_key(rec.session_id, rec.handle_salt),
            now_ms=plane.clock(),
        )
    except PeerError as err:
        # A forgery costs nothing: no trace line, no file, unless the MAC verified.
        return await refuse(_verified_claimant(token, audience_values, lookup, plane.keys), None, err)

    rec, path = v.rec, v.claims.p
    plane_cfg = rec.manifest.exports.peer_files
    assert plane_cfg is not None  # checked by verify
    if rec.workdir is None:
        return await refuse(rec, path, NotFound())
    try:
        got = await plane.executor.run(
            _open_and_read,
            rec.workdir,
            root_components(plane_cfg.root),
            v.components,
            plane_cfg.max_bytes,
            rec.uid,
            follows_links(rec.containment),
        )
    except PeerError as err:
        return await refuse(rec, path, err)
    except OSError as exc:
        return await refuse(rec, path, IoError(exc.strerror or "unexpected error"))

    headers = _headers(handle_id)
    headers["content-type"] = "application/octet-stream"
    headers["x-murmur-mtime-ms"] = str(got.mtime_ms)
    if isinstance(got, SmallBody):
        headers["etag"] = f'"sha256:{got.sha256}"'
        payload = record(rec, path, None, len(got.data), got.sha256)
        assert payload is not None
        await plane.trace(rec, "peer_handle_redeem", payload)
        return web.Response(body=got.data, headers=headers)
    try:
        return await _serve_large(plane, request, rec, path, got, headers, record, refuse)
    finally:
        # Closing a read-only descriptor does no data I/O; it is done on the loop so the hot
        # path pays for no extra executor round trip.
        os.close(got.fd)


async def _serve_large(
    plane: PeerServices,
    request: web.Request,
    rec: SessionRecord,
    path: str,
    opened: OpenedFile,
    headers: dict[str, str],
    record: Callable[..., dict[str, object] | None],
    refuse: Callable[..., Any],
) -> web.StreamResponse:
    sha = plane.etags.get(opened.identity)
    if sha is None:
        try:
            sha = await plane.executor.run(_hash_fd, opened)
        except OSError as exc:
            return await refuse(rec, path, IoError(exc.strerror or "unexpected error"))  # type: ignore[no-any-return]
        if sha is None:
            err = IoError("the file changed while it was read; retry the redeem")
            return await refuse(rec, path, err)  # type: ignore[no-any-return]
        plane.etags.put(opened.identity, sha)
    headers["etag"] = f'"sha256:{sha}"'
    resp = web.StreamResponse(headers=headers)
    resp.content_length = opened.size
    await resp.prepare(request)
    transport = request.transport
    loop = asyncio.get_running_loop()
    sent_ok = False
    try:
        if transport is None:
            raise ConnectionResetError("connection lost")
        # Wrapping an already open descriptor (closefd=False) does no I/O.
        with open(opened.fd, "rb", buffering=0, closefd=False) as fobj:  # noqa: ASYNC230
            try:
                await loop.sendfile(transport, fobj, 0, opened.size)
            except NotImplementedError:
                await _send_chunks(plane, resp, opened)
        # fstat on an open descriptor reads in-memory inode data: no executor hop needed.
        sent_ok = _identity(opened.fd) == opened.identity
    finally:
        if not sent_ok and request.transport is not None:
            request.transport.abort()
    if not sent_ok:
        payload = record(rec, path, IoError("the file changed while it was served"))
        if payload is not None:
            await plane.trace(rec, "peer_handle_redeem", payload)
        return resp
    await resp.write_eof()
    payload = record(rec, path, None, opened.size, sha)
    if payload is not None:
        await plane.trace(rec, "peer_handle_redeem", payload)
    return resp


async def _send_chunks(plane: PeerServices, resp: web.StreamResponse, opened: OpenedFile) -> None:
    """Fallback when the transport cannot sendfile: chunks read through the executor."""
    offset = 0
    while offset < opened.size:
        chunk = await plane.executor.run(os.pread, opened.fd, min(_HASH_CHUNK, opened.size - offset), offset)
        if not chunk:
            raise ConnectionResetError("the file shrank while it was served")
        await resp.write(chunk)
        offset += len(chunk)

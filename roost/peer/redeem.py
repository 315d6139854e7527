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

Serving: bytes and ``etag`` always describe the same content, and the file work happens where
the session's workdir is, through the session-files port (:mod:`roost.peer.files`): this host's
executor, or the keeper of the Ray node the session runs on. Files up to 64 KiB are read once,
hashed and sent from memory. A larger one is hashed over the same descriptor (or its hash comes
from a cache keyed by its identity), sent, and its identity read again afterwards; if it changed
while it was sent, or its node stopped answering, the connection is aborted so the client sees a
short body (a transport error), never a complete 200 whose etag does not match
(:mod:`roost.peer.reading`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import structlog
from aiohttp import web

from roost.events import ObservedError
from roost.http.middleware import json_error
from roost.ids import token_id
from roost.peer import span_attrs
from roost.peer.errors import IoError, MethodNotAllowed, NotFound, PeerError
from roost.peer.files import LargeBody, SmallBody, export_of
from roost.peer.verify import verified_claimant, verify
from roost.sessions import SessionRecord
from roost.wire import AUDIENCE_HEADER

if TYPE_CHECKING:
    from roost.peer.context import PeerServices

__all__ = ["PREFIX", "redeem"]

log = structlog.get_logger("roost.peer")

PREFIX: Final = "/resources/peer"

_Record = Callable[..., dict[str, object] | None]
_Refuse = Callable[[SessionRecord | None, str | None, PeerError], Awaitable[web.Response]]


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
        return await refuse(verified_claimant(token, audience_values, lookup, plane.keys), None, err)

    rec, path = v.rec, v.claims.p
    export = export_of(rec)
    if export is None:  # the plane was checked by verify: no workdir registered
        return await refuse(rec, path, NotFound())
    try:
        got = await plane.files.open_export(rec, export, v.components)
    except PeerError as err:
        return await refuse(rec, path, err)

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
        await got.close()


async def _serve_large(
    plane: PeerServices,
    request: web.Request,
    rec: SessionRecord,
    path: str,
    body: LargeBody,
    headers: dict[str, str],
    record: _Record,
    refuse: _Refuse,
) -> web.StreamResponse:
    try:
        sha = await body.sha256()
    except PeerError as err:
        return await refuse(rec, path, err)
    headers["etag"] = f'"sha256:{sha}"'
    resp = web.StreamResponse(headers=headers)
    resp.content_length = body.size
    await resp.prepare(request)
    sent_ok = False
    try:
        sent_ok = await body.send(request, resp)
    finally:
        if not sent_ok and request.transport is not None:
            request.transport.abort()
    if not sent_ok:
        payload = record(rec, path, IoError("the file changed while it was served"))
        if payload is not None:
            await plane.trace(rec, "peer_handle_redeem", payload)
        return resp
    await resp.write_eof()
    payload = record(rec, path, None, body.size, sha)
    if payload is not None:
        await plane.trace(rec, "peer_handle_redeem", payload)
    return resp

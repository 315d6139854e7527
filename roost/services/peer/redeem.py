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
probes against a session are visible to it, as upstream's listener records every answer, served
or refused); ``path`` is ``null`` until the MAC verified (seed 000: a payload that failed it is
caller-controlled and not recorded as fact), and ``audience_asserted`` is the header as sent
(``null`` when none was); ``generation`` is always 0 — the daemon does not see a session's task
completions, and a number it made up would be mistaken for one. A refusal before the MAC costs a
forger one trace line in the session it names and nothing else: no file is opened.

Nothing decided before an ``await`` is acted on after it unchecked: once the file is open (and,
for a large one, once it is hashed and once it is sent) checks 4–9 run again, so a session that
ended, a key ring that rotated or a handle that expired meanwhile gets the answer the same
request would get now, never the file (and a large body already on its way is cut short).

This module decides and records; the HTTP half (reading the request, headers, streaming) is
:mod:`roost.http.peer_redeem`.

Serving: bytes and ``etag`` always describe the same content, and the file work happens where
the session's workdir is, through the session-files port (:mod:`roost.services.peer.files`): this host's
executor, or the keeper of the Ray node the session runs on. Files up to 64 KiB are read once,
hashed and sent from memory. A larger one is hashed over the same descriptor (or its hash comes
from a cache keyed by its identity), sent, and its identity read again afterwards; if it changed
while it was sent, or its node stopped answering, the connection is aborted so the client sees a
short body (a transport error), never a complete 200 whose etag does not match
(:mod:`roost.services.peer.reading`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple

import structlog

from roost.core.ids import token_id
from roost.observe.events import Category, ObservedError, Span
from roost.services.peer import span_attrs
from roost.services.peer.errors import HandleNotValid, IoError, MethodNotAllowed, NotFound, PeerError
from roost.services.peer.files import LargeBody, SmallBody, export_of
from roost.services.peer.verify import MAX_AUDIENCE, Verified, claimed_path, claimed_session, verified_claimant, verify
from roost.state.sessions import SessionRecord

if TYPE_CHECKING:
    from roost.services.peer.context import PeerServices

__all__ = ["PREFIX", "LargeFile", "RedeemRequest", "Refusal", "SmallFile", "Stale", "redeem"]

log = structlog.get_logger("roost.peer")

PREFIX: Final = "/resources/peer"


@dataclass(frozen=True, slots=True)
class RedeemRequest:
    """One redeem as the route read it."""

    method: str
    token: str
    """The raw path below ``/resources/peer/`` (empty when there is none)."""
    audience_values: Sequence[str]
    """Every ``x-murmur-audience`` header sent (more than one is as good as none)."""
    door: SessionRecord | None = None
    """The session whose capsule door passed this redeem on (with that session's credential):
    the door serves its own session's handles only, and its session's trace records the answer,
    as upstream's listener of the minting capsule does (docs/peer-plane.md)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """The answer is a refusal; ``handle_id`` is None before there is a handle to name."""

    error: PeerError
    handle_id: str | None


@dataclass(frozen=True, slots=True)
class SmallFile:
    """A small file, read and hashed whole; already recorded as served."""

    handle_id: str
    body: SmallBody


class Stale(NamedTuple):
    """Why a redeem that verified may no longer be answered with the file, and whose trace
    records that (None: nobody's, as for a token that never verified)."""

    error: PeerError
    trace_to: SessionRecord | None


def _category(err: PeerError) -> Category:
    if err.status in (401, 403):
        return "authorization"
    if err.status >= 500:
        return "unknown"
    return "validation"


class _Redemption:
    """One redeem's span, metrics and trace lines, and the checks it repeats after each await."""

    def __init__(self, plane: PeerServices, req: RedeemRequest) -> None:
        self.plane = plane
        self.req = req
        self.handle_id = token_id(req.token)
        asserted = req.audience_values[0] if req.audience_values else None
        # Longer than any audience is no audience (verify.MAX_AUDIENCE): not copied into a trace.
        self.asserted = asserted if asserted is not None and len(asserted) <= MAX_AUDIENCE else None
        self.span: Span = plane.events.start(
            "roost.peer.redeem", **span_attrs({"roost.peer.handle_id": self.handle_id})
        )

    def lookup(self, sid: str) -> SessionRecord | None:
        return self.plane.table.running_session(sid)

    def verify(self) -> Verified:
        """Checks 2–10 (pure half) against the table, keys and clock as they are now."""
        plane = self.plane
        return verify(
            self.req.token,
            self.req.audience_values,
            lookup=self.lookup,
            keys_for=lambda rec: [ring.handle_key(rec.session_id, rec.handle_salt) for ring in plane.verifying],
            now_ms=plane.clock(),
        )

    def recheck(self, rec: SessionRecord) -> Stale | None:
        """None while the handle still verifies for the same running session ``rec``; else the
        refusal the same request gets now, and whose trace may record it (as after a first
        :meth:`verify` that failed)."""
        try:
            again = self.verify()
        except PeerError as err:
            return Stale(err, self.claimant())
        if again.rec is not rec:
            return Stale(HandleNotValid(), None)
        return None

    def claimant(self) -> SessionRecord | None:
        return verified_claimant(self.req.token, self.req.audience_values, self.lookup, self.plane.verifying)

    def record(
        self,
        rec: SessionRecord | None,
        path: str | None,
        err: PeerError | None,
        size: int | None = None,
        sha: str | None = None,
    ) -> dict[str, object] | None:
        """Count and observe the outcome; the trace line for ``rec`` (None: no trace)."""
        outcome = "ok" if err is None else err.code
        self.plane.metrics.handle_redemptions.labels(outcome=outcome).inc()
        if rec is not None:  # the minter's delegation tree is where this redeem belongs
            self.span.within(self.plane.events.session_trace(rec.session_id))
        if err is None:
            self.span.completed(**span_attrs({"roost.peer.outcome": "ok", "roost.peer.bytes": size}))
        else:
            self.span.failed(
                ObservedError(name=type(err).__name__, category=_category(err), code=err.code, status_code=err.status),
                **span_attrs({"roost.peer.outcome": outcome}),
            )
            log.info("peer_redeem_refused", handle_id=self.handle_id, outcome=outcome)
        if rec is None:
            return None
        return {
            "handle_id": self.handle_id,
            "path": path,
            "generation": 0,
            "audience_asserted": self.asserted,
            "bytes": size,
            "sha256": sha,
            "outcome": outcome,
            "reason": None if err is None else err.message,
        }

    async def finish(
        self,
        rec: SessionRecord | None,
        path: str | None,
        err: PeerError | None,
        size: int | None = None,
        sha: str | None = None,
    ) -> None:
        payload = self.record(rec, path, err, size, sha)
        if rec is not None and payload is not None:
            await self.plane.trace(rec, "peer_handle_redeem", payload)

    async def refuse(self, rec: SessionRecord | None, path: str | None, err: PeerError) -> Refusal:
        await self.finish(rec, path, err)
        return Refusal(err, self.handle_id)


class LargeFile:
    """A redeem that passed every check with a large file left open. The HTTP half calls
    :meth:`hash`, sends :attr:`body`, then :meth:`after_send` and :meth:`finish`; and
    :meth:`close` whatever happened."""

    def __init__(self, redemption: _Redemption, rec: SessionRecord, path: str, body: LargeBody) -> None:
        self._r = redemption
        self._rec = rec
        self._path = path
        self.body = body
        self.sha256: str | None = None

    @property
    def handle_id(self) -> str:
        return self._r.handle_id

    async def hash(self) -> str | Refusal:
        """The etag's hash, or the refusal (recorded) when the file changed or the handle no
        longer verifies once it is hashed."""
        try:
            sha = await self.body.sha256()
        except PeerError as err:
            return await self._r.refuse(self._rec, self._path, err)
        stale = self._r.recheck(self._rec)
        if stale is not None:
            return await self._r.refuse(stale.trace_to, self._path, stale.error)
        self.sha256 = sha
        return sha

    def after_send(self, sent_ok: bool) -> Stale | None:
        """None when the answer may complete; else why not (the caller aborts the connection)
        and whose trace records it."""
        if not sent_ok:
            return Stale(IoError("the file changed while it was served"), self._rec)
        return self._r.recheck(self._rec)

    async def finish(self, failed: Stale | None) -> None:
        """Record the outcome :meth:`after_send` gave."""
        if failed is None:
            await self._r.finish(self._rec, self._path, None, self.body.size, self.sha256)
        else:
            await self._r.finish(failed.trace_to, self._path, failed.error)

    async def close(self) -> None:
        await self.body.close()


async def redeem(plane: PeerServices, req: RedeemRequest) -> Refusal | SmallFile | LargeFile:
    """Decide one redeem (any method: the 405 is decided here, before anything else)."""
    if req.method != "GET":
        return Refusal(MethodNotAllowed(), None)
    if not req.token:
        return Refusal(NotFound(), None)
    r = _Redemption(plane, req)
    door = req.door
    try:
        v = r.verify()
    except PeerError as err:
        # Recorded where upstream's listener would: the session the token names (or the door's
        # that received it), the path only once its MAC verified. Nothing else happens for a
        # forgery: no file is opened.
        claimant = r.claimant()
        if door is not None:
            return await r.refuse(door, claimed_path(req.token) if claimant is door else None, err)
        if claimant is not None:
            return await r.refuse(claimant, claimed_path(req.token), err)
        return await r.refuse(claimed_session(req.token, r.lookup), None, err)
    if door is not None and v.rec is not door:
        # Another session's handle, at this session's door: its MAC is not this door's to verify.
        return await r.refuse(door, None, HandleNotValid())

    rec, path = v.rec, v.claims.p
    export = export_of(rec)
    if export is None:  # the plane was checked by verify: no workdir registered
        return await r.refuse(rec, path, NotFound())
    try:
        got = await plane.files.open_export(rec, export, v.components)
    except PeerError as err:
        return await r.refuse(rec, path, err)
    stale = r.recheck(rec)
    if stale is not None:
        if not isinstance(got, SmallBody):
            await got.close()
        return await r.refuse(stale.trace_to, path, stale.error)
    if isinstance(got, SmallBody):
        await r.finish(rec, path, None, len(got.data), got.sha256)
        return SmallFile(r.handle_id, got)
    return LargeFile(r, rec, path, got)

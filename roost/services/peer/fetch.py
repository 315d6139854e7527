"""``POST /peer-fetch``: redeem a peer's handle with the session's own audience, store the bytes.

Order (upstream's, hardened): credential → body → ``peer`` covered by
``capabilities.peer_fetch.allow`` *before any connection* (``network.allow`` is neither
consulted nor sufficient) → the session's own audience (``<its name>@<host:port of its
capsule_url>``; no ``capsule_url`` means no audience: 409) → ``https`` refused → ``GET
<peer>/resources/peer/<handle>`` with ``x-murmur-audience`` → status → bytes streamed to a temp
file under ``peer-in/`` while hashed, with a byte ceiling and one overall timeout → the peer's
etag, and the caller's optional one, checked against the hash → atomic rename into
``peer-in/<handle_id>-<clean name>``. The session is checked to be still running once the peer
answered and again before the rename (:mod:`roost.services.peer.liveness`): one that ended meanwhile
stores nothing.

Decisions on upstream gaps (``docs/peer-plane.md``): a ceiling
(``config.peer_fetch_max_bytes``, checked against ``content-length`` up front and against the
bytes as they arrive) and a timeout (``config.peer_timeout_secs`` for the whole exchange);
``https`` is refused with a sentence rather than dialled in clear text; responses are not
decompressed (``accept-encoding: identity``, no auto-decompression), so the ceiling counts the
bytes we store; a refusal code from the peer is reflected only if it looks like a code
(``[a-z0-9_]{1,64}``), else ``http_<status>``.

The handle goes only into the request path; it is checked to be made of base64url and ``.``
characters first, so it cannot change the URL's shape, and every error text is passed through
:func:`roost.observe.tracelines.redact_text` in case a library quotes the URL.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import aiohttp
import structlog
from yarl import URL

from a2a.client import normalize_peer_url
from a2a.protocol import errors as a2a_errors
from roost.core import netrule
from roost.core.api_models import PeerFetchRequest
from roost.core.ids import token_id
from roost.core.wire import AUDIENCE_HEADER
from roost.observe.events import ObservedError
from roost.observe.tracelines import redact_text
from roost.services.peer import span_attrs
from roost.services.peer.audience import AudienceError, audience
from roost.services.peer.errors import BadPeerRequest, PeerError
from roost.services.peer.files import PeerInSink
from roost.services.peer.liveness import ensure_running
from roost.services.peer.redeem import PREFIX
from roost.services.peer.storage import hint_from_token, stored_path
from roost.state.sessions import SessionRecord

if TYPE_CHECKING:
    from roost.services.peer.context import PeerServices

__all__ = ["fetch", "normalize_etag"]

log = structlog.get_logger("roost.peer")

_TOKEN_CHARS: Final = re.compile(r"[A-Za-z0-9_.-]{1,16384}")
_CODE_RE: Final = re.compile(r"[a-z0-9_]{1,64}")
_ETAG_RE: Final = re.compile(r'"?(?:sha256:)?([0-9a-fA-F]{64})"?')
_CHUNK: Final = 256 * 1024


def normalize_etag(value: str) -> str | None:
    """The lowercase hex sha256 an etag names, or ``None``."""
    m = _ETAG_RE.fullmatch(value.strip())
    return m.group(1).lower() if m else None


class _Refusal(Exception):
    """Internal: a fetch outcome that is not ``ok``; ``outcome`` is what the trace records."""

    def __init__(self, outcome: str, err: PeerError) -> None:
        super().__init__(err.message)
        self.outcome = outcome
        self.err = err


async def fetch(plane: PeerServices, rec: SessionRecord, req: PeerFetchRequest) -> dict[str, object]:
    """Fetch a handle into ``rec``'s ``peer-in/``; raise :class:`PeerError` (already traced)."""
    peer, handle, want_etag = req.peer, req.handle, req.etag
    handle_id = token_id(handle)
    span = plane.events.start(
        "roost.peer.fetch", **span_attrs({"roost.session_id": rec.session_id, "roost.peer.handle_id": handle_id})
    )
    try:
        result = await _fetch(
            plane,
            rec,
            peer,
            handle,
            handle_id,
            want_etag,
            alive=lambda: ensure_running(plane.table, rec, span, "fetch"),
        )
    except _Refusal as r:
        span.failed(
            ObservedError(name="PeerFetchRefused", category="network", code=r.outcome, status_code=r.err.status)
        )
        log.info("peer_fetch_refused", session_id=rec.session_id, handle_id=handle_id, outcome=r.outcome)
        await plane.traces.write(
            rec,
            "peer_file_fetch",
            {
                "peer": peer,
                "handle_id": handle_id,
                "stored_path": None,
                "bytes": None,
                "sha256": None,
                "outcome": r.outcome,
                "reason": r.err.message,
            },
        )
        raise r.err from None
    span.completed(**span_attrs({"roost.peer.outcome": "ok", "roost.peer.bytes": result["bytes"]}))
    log.info("peer_file_fetched", session_id=rec.session_id, handle_id=handle_id, bytes=result["bytes"])
    await plane.traces.write(
        rec,
        "peer_file_fetch",
        {
            "peer": peer,
            "handle_id": handle_id,
            "stored_path": result["stored_path"],
            "bytes": result["bytes"],
            "sha256": result["sha256"],
            "outcome": "ok",
            "reason": None,
        },
    )
    return result


async def _fetch(
    plane: PeerServices,
    rec: SessionRecord,
    peer: str,
    handle: str,
    handle_id: str,
    want_etag: str | None,
    *,
    alive: Callable[[], None],
) -> dict[str, object]:
    cfg = plane.config
    if not netrule.allows(rec.manifest.capabilities.peer_fetch.allow, peer):
        msg = f"network policy: '{peer}' not in capabilities.peer_fetch.allow"
        raise _Refusal("peer_not_allowed", BadPeerRequest(403, "peer_not_allowed", msg))
    if rec.workdir is None:
        msg = "this session registered no workdir, so roost has nowhere to store a fetched file"
        raise _Refusal("io_error", BadPeerRequest(409, "no_workdir", msg))
    if not rec.capsule_url:
        msg = (
            "this session registered no capsule_url, so it has no audience (<name>@<host:port of its door>) "
            "to redeem a peer handle with"
        )
        raise _Refusal("peer_unreachable", BadPeerRequest(409, "no_audience", msg))
    try:
        own = audience(rec.name, rec.capsule_url)
    except AudienceError:
        msg = "this session's capsule_url gives no host:port, so it has no audience to redeem a peer handle with"
        raise _Refusal("peer_unreachable", BadPeerRequest(409, "no_audience", msg)) from None
    try:
        base = normalize_peer_url(peer)
    except a2a_errors.UnsupportedPeerURL as exc:
        raise _Refusal("peer_unreachable", BadPeerRequest(400, "unsupported_peer_url", str(exc))) from None
    if not _TOKEN_CHARS.fullmatch(handle):
        raise _Refusal(
            "malformed_handle", BadPeerRequest(400, "malformed_handle", "the handle is not a well-formed mh1 token")
        )
    url = URL.build(scheme=base.scheme, host=base.raw_host or "", port=base.explicit_port, encoded=True).with_path(
        f"{PREFIX}/{handle}", encoded=True
    )
    name = stored_path(handle_id, hint_from_token(handle))
    writer = plane.files.peer_in(rec, rec.workdir)
    try:
        async with asyncio.timeout(cfg.peer_timeout_secs):
            result = await _exchange(
                plane, url, peer, own, writer, name, want_etag, cfg.peer_fetch_max_bytes, alive=alive
            )
    except TimeoutError:
        await writer.abort()
        msg = f"'{peer}' did not answer the redeem within {cfg.peer_timeout_secs:g} s"
        raise _Refusal("peer_unreachable", BadPeerRequest(504, "peer_unreachable", msg)) from None
    except BaseException:
        await writer.abort()
        raise
    return result


async def _exchange(
    plane: PeerServices,
    url: URL,
    peer: str,
    own_audience: str,
    writer: PeerInSink,
    name: str,
    want_etag: str | None,
    ceiling: int,
    *,
    alive: Callable[[], None],
) -> dict[str, object]:
    headers = {AUDIENCE_HEADER: own_audience, "accept-encoding": "identity"}
    try:
        async with plane.http().get(url, headers=headers, allow_redirects=False) as resp:
            if resp.status != 200:
                code = await _peer_code(resp)
                msg = f"{peer} refused the handle: {code}"
                raise _Refusal(code, BadPeerRequest(502, code, msg))
            length = resp.content_length
            if length is not None and length > ceiling:
                raise _Refusal("too_large", _too_large(peer, ceiling))
            alive()
            try:
                await writer.open()
            except OSError as exc:
                raise _Refusal("io_error", _io_error(exc)) from None
            h = hashlib.sha256()
            total = 0
            async for chunk in resp.content.iter_chunked(_CHUNK):
                total += len(chunk)
                if total > ceiling:
                    raise _Refusal("too_large", _too_large(peer, ceiling))
                h.update(chunk)
                try:
                    await writer.write(chunk)
                except OSError as exc:
                    raise _Refusal("io_error", _io_error(exc)) from None
            if length is not None and total != length:
                raise _Refusal(
                    "peer_unreachable",
                    BadPeerRequest(502, "peer_unreachable", f"{peer} closed the connection before the whole body"),
                )
            served = resp.headers.get("etag")
    except (aiohttp.ClientError, OSError) as exc:
        reason = redact_text(str(exc) or type(exc).__name__)
        msg = f"could not reach {peer}: {reason}"
        raise _Refusal("peer_unreachable", BadPeerRequest(502, "peer_unreachable", msg)) from None
    sha = h.hexdigest()
    if served is not None and served.strip() != f'"sha256:{sha}"':
        msg = f"{peer} served an etag that does not describe its own body"
        raise _Refusal("etag_mismatch", BadPeerRequest(502, "etag_mismatch", msg))
    if want_etag is not None and normalize_etag(want_etag) != sha:
        msg = "the file the handle names no longer has the etag you asked for; it changed since you saw it"
        raise _Refusal("etag_mismatch", BadPeerRequest(412, "etag_mismatch", msg))
    final = name.split("/", 1)[1]
    alive()  # raises if the session ended meanwhile; the caller's abort removes the temp file
    try:
        await writer.commit(final)
    except OSError as exc:
        raise _Refusal("io_error", _io_error(exc)) from None
    return {"stored_path": name, "bytes": total, "sha256": sha}


async def _peer_code(resp: aiohttp.ClientResponse) -> str:
    """The refusal code the peer gave, if it looks like one; else ``http_<status>``."""
    try:
        raw = await resp.content.read(4096)
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError, aiohttp.ClientError):
        obj = None
    code = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(code, str) and _CODE_RE.fullmatch(code):
        return code
    return f"http_{resp.status}"


def _too_large(peer: str, ceiling: int) -> BadPeerRequest:
    return BadPeerRequest(
        502, "too_large", f"{peer} sent more than this daemon's peer_fetch_max_bytes of {ceiling} bytes"
    )


def _io_error(exc: OSError) -> BadPeerRequest:
    reason = os.strerror(exc.errno) if exc.errno else type(exc).__name__
    return BadPeerRequest(500, "io_error", f"storing the fetched file failed: {reason[:1].lower()}{reason[1:]}")

"""``POST /handles``: mint an audience-bound, expiring ``mh1`` handle for one exported file.

Order (upstream's, adapted): credential → body → plane declared → workdir known → ``peer``
covered by ``capabilities.network.allow`` (*before* any connection: minting grants no new
outbound authority) → agent card read with a timeout → audience → path rules and descriptor
walk → regular file → ``ttl`` → token. Like upstream, the card is read before the path is
resolved, so a bad path still contacts the (allowed) peer.

Decisions on upstream quirks (``docs/peer-plane.md``):

* ``ttl_secs`` must be a JSON integer > 0 when present (upstream silently ignores a number and
  reads only strings); it can only shrink the lifetime: ``min(ttl_secs, max_ttl)``.
* ``path`` is percent-decoded once here and the decoded canonical path is what the token
  carries; redeem never decodes again.
* ``https://`` peers are refused with a sentence (upstream dials them as clear-text HTTP).
* Size is not checked at mint (upstream): a file may grow or shrink before redeem, which
  enforces ``max_bytes``.

The session is checked to be still running after each ``await`` (:mod:`roost.services.peer.liveness`):
one that ended while its card was read or its path resolved mints nothing.

Every outcome after the body has been read is recorded as ``peer_handle_mint`` in the minter's
trace: ``handle_id``/``expires_at_ms`` null unless ``ok``, ``path`` canonical on ``ok`` and as
asked otherwise, ``audience`` empty until the card was read.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from a2a.protocol import errors as a2a_errors
from roost.core import netrule, tokens
from roost.core import peerpaths as paths
from roost.core.api_models import HandleRequest
from roost.core.ids import token_id
from roost.observe.events import ObservedError
from roost.services.peer import span_attrs
from roost.services.peer.audience import AudienceError, audience_from_card
from roost.services.peer.errors import BadPeerRequest, NoPeerPlane, OutsideRoot, PeerError
from roost.services.peer.files import export_of
from roost.services.peer.liveness import ensure_running
from roost.state.sessions import SessionRecord

if TYPE_CHECKING:
    from roost.services.peer.context import PeerServices

__all__ = ["mint", "parse_mint_body"]

log = structlog.get_logger("roost.peer")

_U64_MAX = 2**64 - 1


def parse_mint_body(body: dict[str, object]) -> HandleRequest:
    """The typed request (path, peer, ttl_secs) from a ``POST /handles`` body, or a 400 ``invalid_request``."""
    out: list[str] = []
    for key in ("path", "peer"):
        value = body.get(key)
        if not isinstance(value, str) or not value.strip():
            raise BadPeerRequest(400, "invalid_request", f"POST /handles requires a non-empty string '{key}'")
        out.append(value)
    ttl = body.get("ttl_secs")
    if ttl is not None and (type(ttl) is not int or ttl <= 0):
        raise BadPeerRequest(
            400,
            "invalid_request",
            "ttl_secs must be a positive integer number of seconds (it can only shorten a handle)",
        )
    # The path is not trimmed: a name with spaces is a name. The peer is an address: trimmed.
    return HandleRequest.model_construct(path=out[0], peer=out[1].strip(), ttl_secs=ttl)


async def mint(plane: PeerServices, rec: SessionRecord, req: HandleRequest) -> dict[str, object]:
    """Mint a handle for ``rec``; raise :class:`PeerError` (already traced) on refusal."""
    asked_path, peer, ttl = req.path, req.peer, req.ttl_secs
    span = plane.events.start(
        "roost.peer.mint",
        trace=plane.events.session_trace(rec.session_id),
        **span_attrs({"roost.session_id": rec.session_id}),
    )
    audience = ""

    async def refuse(err: PeerError, outcome: str | None = None) -> PeerError:
        code = outcome or err.code
        plane.metrics.handles_minted.labels(outcome=code).inc()
        span.failed(ObservedError(name=type(err).__name__, category="validation", code=code, status_code=err.status))
        log.info("peer_mint_refused", session_id=rec.session_id, outcome=code)
        await plane.traces.write(
            rec,
            "peer_handle_mint",
            {
                "handle_id": None,
                # as asked; a lone surrogate (JSON "\udcxx") is written as its escape
                "path": asked_path.encode("utf-8", "backslashreplace").decode("utf-8"),
                "audience": audience,
                "expires_at_ms": None,
                "outcome": code,
                "reason": err.message,
            },
        )
        return err

    plane_cfg = rec.manifest.exports.peer_files
    if plane_cfg is None:
        raise await refuse(
            NoPeerPlane("this session declares no exports.peer_files block in its manifest, so it has no peer plane")
        )
    export = export_of(rec)
    if export is None:
        raise await refuse(
            BadPeerRequest(
                409,
                "no_workdir",
                "this session registered no workdir, so roost cannot find its exports.peer_files.root",
            )
        )
    if not netrule.allows(rec.manifest.capabilities.network.allow, peer):
        raise await refuse(
            BadPeerRequest(403, "peer_not_allowed", f"network policy: '{peer}' not in capabilities.network.allow"),
            "peer_unreachable",
        )
    try:
        async with asyncio.timeout(plane.config.peer_timeout_secs):
            card = await plane.a2a.fetch_card(peer)
        audience = audience_from_card(card)
    except a2a_errors.UnsupportedPeerURL as exc:
        raise await refuse(BadPeerRequest(400, "unsupported_peer_url", str(exc)), "peer_unreachable") from None
    except TimeoutError:
        reason = (
            f"peer_unreachable: reading the agent card of '{peer}' timed out after {plane.config.peer_timeout_secs:g} s"
        )
        raise await refuse(BadPeerRequest(502, "peer_unreachable", reason)) from None
    except (a2a_errors.A2AError, AudienceError) as exc:
        reason = f"peer_unreachable: cannot read the agent card of '{peer}': {exc}"
        raise await refuse(BadPeerRequest(502, "peer_unreachable", reason)) from None
    ensure_running(plane.table, rec, span, "mint")

    try:
        components = paths.mint_components(asked_path)
    except paths.PathRefused:
        raise await refuse(OutsideRoot("the path names a location outside the peer export root")) from None
    try:
        components = await plane.files.mint_target(rec, export, components)
    except PeerError as err:
        raise await refuse(_mint_sentence(err)) from None
    ensure_running(plane.table, rec, span, "mint")

    lifetime = plane_cfg.max_ttl if ttl is None else min(ttl, plane_cfg.max_ttl)
    exp = min(plane.clock() + lifetime * 1000, _U64_MAX)
    canonical = paths.canonical(components)
    key = plane.keys.handle_key(rec.session_id, rec.handle_salt)
    handle = tokens.mint_handle(key, iss=rec.session_id, path=canonical, exp_ms=exp, audience=audience)
    handle_id = token_id(handle)
    plane.metrics.handles_minted.labels(outcome="ok").inc()
    span.completed(**span_attrs({"roost.peer.handle_id": handle_id, "roost.peer.outcome": "ok"}))
    log.info("peer_handle_minted", session_id=rec.session_id, handle_id=handle_id, expires_at_ms=exp)
    await plane.traces.write(
        rec,
        "peer_handle_mint",
        {
            "handle_id": handle_id,
            "path": canonical,
            "audience": audience,
            "expires_at_ms": exp,
            "outcome": "ok",
            "reason": None,
        },
    )
    return {"handle": handle, "handle_id": handle_id, "expires_at_ms": exp, "path": canonical, "audience": audience}


def _mint_sentence(err: PeerError) -> PeerError:
    """Re-word the redeem-side sentences for the minter (same code and status, about *its* path)."""
    sentences = {
        "outside_root": "the path names a location outside the peer export root",
        "not_found": "no such file under the peer export root",
        "not_a_regular_file": "the path does not name a regular file, so a handle for it could never be redeemed",
    }
    text = sentences.get(err.code)
    if text is None:
        return err
    clone = BadPeerRequest(err.status, err.code, text)
    return clone

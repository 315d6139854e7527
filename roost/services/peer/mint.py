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
from typing import TYPE_CHECKING, NamedTuple

import structlog

from a2a.protocol import errors as a2a_errors
from roost.core import netrule, tokens
from roost.core import peerpaths as paths
from roost.core.api_models import HandleRequest
from roost.core.ids import token_id
from roost.observe.events import ObservedError, Span
from roost.services.peer import span_attrs
from roost.services.peer.audience import AudienceError, audience_from_card
from roost.services.peer.errors import BadPeerRequest, NoPeerPlane, OutsideRoot, PeerError
from roost.services.peer.files import Export, export_of
from roost.services.peer.liveness import ensure_running
from roost.state.sessions import SessionRecord

if TYPE_CHECKING:
    from roost.services.peer.context import PeerServices

__all__ = ["mint"]

log = structlog.get_logger("roost.peer")

_U64_MAX = 2**64 - 1


class _Refused(Exception):
    """A refusal on its way to :func:`mint`, which traces it once; ``outcome`` is what the trace
    and the metric record (the error's code unless the step says otherwise)."""

    def __init__(self, err: PeerError, outcome: str | None = None) -> None:
        super().__init__(err.message)
        self.err = err
        self.outcome = outcome or err.code


class _Minted(NamedTuple):
    handle: str
    handle_id: str
    path: str
    expires_at_ms: int


async def mint(plane: PeerServices, rec: SessionRecord, req: HandleRequest) -> dict[str, object]:
    """Mint a handle for ``rec``; raise :class:`PeerError` (already traced) on refusal.

    The steps, in upstream's order, each a named half: the session's export and the network rule
    (:func:`_exported`), the peer's card (:func:`_audience_of`), the path (:func:`_target`), the
    token (:func:`_issue`). The session is checked to be still running after each await.
    """
    span = plane.events.start(
        "roost.peer.mint",
        trace=plane.events.session_trace(rec.session_id),
        **span_attrs({"roost.session_id": rec.session_id}),
    )
    audience = ""
    try:
        export, max_ttl = _exported(rec, req.peer)
        audience = await _audience_of(plane, req.peer)
        ensure_running(plane.table, rec, span, "mint")
        components = await _target(plane, rec, export, req.path)
        ensure_running(plane.table, rec, span, "mint")
    except _Refused as refused:
        raise await _refuse(plane, rec, span, req.path, audience, refused) from None
    lifetime = max_ttl if req.ttl_secs is None else min(req.ttl_secs, max_ttl)
    minted = _issue(plane, rec, components, audience, lifetime)
    plane.metrics.handles_minted.labels(outcome="ok").inc()
    span.completed(**span_attrs({"roost.peer.handle_id": minted.handle_id, "roost.peer.outcome": "ok"}))
    log.info(
        "peer_handle_minted", session_id=rec.session_id, handle_id=minted.handle_id, expires_at_ms=minted.expires_at_ms
    )
    await plane.traces.write(
        rec,
        "peer_handle_mint",
        {
            "handle_id": minted.handle_id,
            "path": minted.path,
            "audience": audience,
            "expires_at_ms": minted.expires_at_ms,
            "outcome": "ok",
            "reason": None,
        },
    )
    return {
        "handle": minted.handle,
        "handle_id": minted.handle_id,
        "expires_at_ms": minted.expires_at_ms,
        "path": minted.path,
        "audience": audience,
    }


def _exported(rec: SessionRecord, peer: str) -> tuple[Export, int]:
    """The session's export and its handles' longest lifetime, if it has a plane, a workdir,
    and a network rule that covers ``peer`` (minting grants no new outbound authority)."""
    plane_cfg = rec.manifest.exports.peer_files
    if plane_cfg is None:
        raise _Refused(
            NoPeerPlane("this session declares no exports.peer_files block in its manifest, so it has no peer plane")
        )
    export = export_of(rec)
    if export is None:
        raise _Refused(
            BadPeerRequest(
                409,
                "no_workdir",
                "this session registered no workdir, so roost cannot find its exports.peer_files.root",
            )
        )
    if not netrule.allows(rec.manifest.capabilities.network.allow, peer):
        raise _Refused(
            BadPeerRequest(403, "peer_not_allowed", f"network policy: '{peer}' not in capabilities.network.allow"),
            "peer_unreachable",
        )
    return export, plane_cfg.max_ttl


async def _audience_of(plane: PeerServices, peer: str) -> str:
    """The audience ``peer``'s agent card names, read within the plane's timeout."""
    try:
        async with asyncio.timeout(plane.config.peer_timeout_secs):
            card = await plane.a2a.fetch_card(peer)
        return audience_from_card(card)
    except a2a_errors.UnsupportedPeerURL as exc:
        raise _Refused(BadPeerRequest(400, "unsupported_peer_url", str(exc)), "peer_unreachable") from None
    except TimeoutError:
        reason = (
            f"peer_unreachable: reading the agent card of '{peer}' timed out after {plane.config.peer_timeout_secs:g} s"
        )
        raise _Refused(BadPeerRequest(502, "peer_unreachable", reason)) from None
    except (a2a_errors.A2AError, AudienceError) as exc:
        reason = f"peer_unreachable: cannot read the agent card of '{peer}': {exc}"
        raise _Refused(BadPeerRequest(502, "peer_unreachable", reason)) from None


async def _target(plane: PeerServices, rec: SessionRecord, export: Export, asked_path: str) -> tuple[str, ...]:
    """The components the handle will name: the path rules, then the descriptor walk to a regular file."""
    try:
        components = paths.mint_components(asked_path)
    except paths.PathRefused:
        raise _Refused(OutsideRoot("the path names a location outside the peer export root")) from None
    try:
        return await plane.files.mint_target(rec, export, components)
    except PeerError as err:
        raise _Refused(_mint_sentence(err)) from None


def _issue(
    plane: PeerServices, rec: SessionRecord, components: tuple[str, ...], audience: str, lifetime: int
) -> _Minted:
    """The handle itself: the canonical path, bound to ``audience``, expiring ``lifetime`` s from now."""
    exp = min(plane.clock() + lifetime * 1000, _U64_MAX)
    canonical = paths.canonical(components)
    key = plane.keys.handle_key(rec.session_id, rec.handle_salt)
    handle = tokens.mint_handle(key, iss=rec.session_id, path=canonical, exp_ms=exp, audience=audience)
    return _Minted(handle, token_id(handle), canonical, exp)


async def _refuse(
    plane: PeerServices, rec: SessionRecord, span: Span, asked_path: str, audience: str, refused: _Refused
) -> PeerError:
    """Count, finish the span, log and trace a refusal; the error the client gets."""
    err, code = refused.err, refused.outcome
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

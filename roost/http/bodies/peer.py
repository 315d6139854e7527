"""The peer plane's bodies: ``POST /handles`` and ``POST /peer-fetch``.

A mistake here is the plane's coded refusal (``{"error": "invalid_request", "message": ...}``,
400), the shape every peer-plane answer has (:mod:`roost.services.peer.errors`), not the
referee's plain one.
"""

from __future__ import annotations

from roost.core.api_models import HandleRequest, PeerFetchRequest
from roost.core.fields import Body, nonblank_str
from roost.services.peer.errors import BadPeerRequest
from roost.services.peer.fetch import normalize_etag

__all__ = ["parse_fetch", "parse_mint"]


def _invalid(sentence: str) -> BadPeerRequest:
    return BadPeerRequest(400, "invalid_request", sentence)


def _required(body: Body, route: str, key: str) -> str:
    value = nonblank_str(body, key)
    if value is None:
        raise _invalid(f"{route} requires a non-empty string '{key}'")
    return value


def parse_mint(body: Body) -> HandleRequest:
    """The typed request (path, peer, ttl_secs) from a ``POST /handles`` body."""
    path = _required(body, "POST /handles", "path")
    peer = _required(body, "POST /handles", "peer")
    ttl = body.get("ttl_secs")
    if ttl is not None and (type(ttl) is not int or ttl <= 0):
        raise _invalid("ttl_secs must be a positive integer number of seconds (it can only shorten a handle)")
    # The path is not trimmed: a name with spaces is a name. The peer is an address: trimmed.
    return HandleRequest.model_construct(path=path, peer=peer.strip(), ttl_secs=ttl)


def parse_fetch(body: Body) -> PeerFetchRequest:
    """The typed request (peer, handle, etag) from a ``POST /peer-fetch`` body."""
    peer = _required(body, "POST /peer-fetch", "peer")
    handle = _required(body, "POST /peer-fetch", "handle")
    etag = body.get("etag")
    if etag is not None and (not isinstance(etag, str) or normalize_etag(etag) is None):
        raise _invalid("etag must be a sha256 etag: '\"sha256:<64 hex>\"', 'sha256:<64 hex>' or 64 hex")
    return PeerFetchRequest.model_construct(peer=peer.strip(), handle=handle.strip(), etag=etag)

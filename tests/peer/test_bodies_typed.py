"""The peer plane's bodies parse at the route into api_models' typed requests, or a 400 ``invalid_request``."""

from __future__ import annotations

import pytest

from roost.core.api_models import HandleRequest, PeerFetchRequest
from roost.http.bodies.peer import parse_fetch, parse_mint
from roost.services.peer.errors import BadPeerRequest


def test_handle_and_fetch_bodies_parse_to_their_typed_requests() -> None:
    mint = parse_mint({"path": " a b ", "peer": " http://h:1 ", "ttl_secs": 30})
    assert isinstance(mint, HandleRequest) and (mint.path, mint.peer, mint.ttl_secs) == (" a b ", "http://h:1", 30)
    fetch = parse_fetch({"peer": "h:1 ", "handle": " mph1.x ", "etag": "a" * 64})
    assert isinstance(fetch, PeerFetchRequest) and (fetch.peer, fetch.handle, fetch.etag) == ("h:1", "mph1.x", "a" * 64)


@pytest.mark.parametrize(
    ("parse", "body"),
    [
        (parse_mint, {"path": "p", "peer": "", "ttl_secs": 1}),
        (parse_mint, {"path": "p", "peer": "h:1", "ttl_secs": 0}),
        (parse_fetch, {"peer": "x"}),
        (parse_fetch, {"peer": "x", "handle": "h", "etag": "nope"}),
    ],
)
def test_malformed_bodies_are_invalid_requests(parse: object, body: dict[str, object]) -> None:
    with pytest.raises(BadPeerRequest) as info:
        parse(body)  # type: ignore[operator]
    assert (info.value.status, info.value.code) == (400, "invalid_request")

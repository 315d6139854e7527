"""The one egress rule of relayed sends and push webhooks (roost/core/egress.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roost.core.egress import Egress, egress_refusal, network_refusal, own_listeners, own_refusal

OWN = own_listeners([("127.0.0.1", 7700), ("0.0.0.0", 7443)], ["127.0.0.1", "10.1.2.3", "fe80::1"])


def test_the_network_rule_comes_first_with_upstreams_sentence() -> None:
    rule = Egress(("example.com",), OWN)
    assert rule.refusal("http://other.com/") == network_refusal("http://other.com/")
    assert (
        network_refusal("http://other.com/") == "network policy: 'http://other.com/' not in capabilities.network.allow"
    )
    assert rule.refusal("http://example.com:8080/hook") is None


def test_own_listeners_are_refused_under_any_loopback_spelling() -> None:
    rule = Egress(("127.0.0.1", "localhost", "10.1.2.3", "[::1]"), OWN)
    for url in ("http://127.0.0.1:7700/", "http://localhost:7700/jobs", "http://[::1]:7700/", "http://10.1.2.3:7443/"):
        assert rule.refusal(url) == own_refusal(url), url
    assert rule.refusal("http://127.0.0.1:7701/") is None  # another port: a door, say
    assert rule.refusal("http://10.1.2.3:7700/") is None  # 7700 is bound to loopback only


def test_the_daemons_listeners_by_address_by_name_and_by_another_loopback_address() -> None:
    own = own_listeners([("127.0.0.1", 7700), ("10.0.0.5", 7443)], [])
    allow = ("127.0.0.1", "localhost", "127.0.0.9", "10.0.0.5", "10.0.0.6", "example.com")
    for url in ("http://127.0.0.1:7700", "http://localhost:7700/x", "http://127.0.0.9:7700", "https://10.0.0.5:7443"):
        assert egress_refusal(allow, own, url) == own_refusal(url), url
    for url in ("http://127.0.0.1:7701", "http://10.0.0.6:7443", "http://example.com:7700"):
        assert egress_refusal(allow, own, url) is None, url
    assert egress_refusal(allow, own, "not a url") != own_refusal("not a url")


def test_a_wildcard_listener_is_own_on_every_address_of_the_host() -> None:
    assert {("10.1.2.3", 7443), ("fe80::1", 7443), ("127.0.0.1", 7443)} <= OWN
    assert ("127.0.0.1", 7700) in OWN and ("10.1.2.3", 7700) not in OWN


def test_the_reached_address_is_checked_too() -> None:
    rule = Egress(("rebind.example",), OWN)
    assert rule.refusal("http://rebind.example:7700/") is None  # the name is not an address of ours...
    assert rule.peer_refusal("http://rebind.example:7700/", "127.0.0.1", 7700) is not None  # ...where it lands is
    assert rule.peer_refusal("http://rebind.example:7700/", "192.0.2.7", 7700) is None
    assert Egress(("x",)).peer_refusal("http://x/", "127.0.0.1", 7700) is None  # no listeners named: nothing own


@given(st.integers(1, 65535), st.sampled_from(["127.0.0.1", "localhost", "127.9.9.9", "[::1]"]))
def test_loopback_is_own_exactly_on_the_own_ports(port: int, host: str) -> None:
    refusal = egress_refusal((host,), OWN, f"http://{host}:{port}/")
    assert (refusal is not None) == (port in (7700, 7443))

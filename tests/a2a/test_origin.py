"""Origin/trust derivation and lanes: no header combination launders trust."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a.protocol.origin import (
    LANE_ORDER,
    Lane,
    Origin,
    Provenance,
    Trust,
    lane_for,
    outbound_headers,
)

TABLE = [
    ("peer", "trusted", Origin.PEER, Trust.TRUSTED),
    ("peer", None, Origin.PEER, Trust.UNTRUSTED),
    ("peer", "yes", Origin.PEER, Trust.UNTRUSTED),
    ("peer", "", Origin.PEER, Trust.UNTRUSTED),
    ("peer", "untrusted", Origin.PEER, Trust.UNTRUSTED),
    ("PEER", "TRUSTED", Origin.PEER, Trust.TRUSTED),
    ("Completion", "Trusted", Origin.COMPLETION, Trust.TRUSTED),
    ("completion", "untrusted", Origin.COMPLETION, Trust.UNTRUSTED),
    ("completion", None, Origin.COMPLETION, Trust.UNTRUSTED),
    ("completion", "trusted ", Origin.COMPLETION, Trust.UNTRUSTED),
    ("user", "trusted", Origin.EVENT, Trust.UNTRUSTED),
    ("schedule", "trusted", Origin.EVENT, Trust.UNTRUSTED),
    ("system", "trusted", Origin.EVENT, Trust.UNTRUSTED),
    ("event", "trusted", Origin.EVENT, Trust.UNTRUSTED),
    (None, "trusted", Origin.EVENT, Trust.UNTRUSTED),
    ("", "trusted", Origin.EVENT, Trust.UNTRUSTED),
    (" peer", "trusted", Origin.EVENT, Trust.UNTRUSTED),
    ("peers", "trusted", Origin.EVENT, Trust.UNTRUSTED),
    (None, None, Origin.EVENT, Trust.UNTRUSTED),
]


@pytest.mark.parametrize(("origin", "trust", "want_origin", "want_trust"), TABLE)
def test_from_wire_table(origin: str | None, trust: str | None, want_origin: Origin, want_trust: Trust) -> None:
    p = Provenance.from_wire(origin, trust)
    assert (p.origin, p.trust) == (want_origin, want_trust)


header_values = st.one_of(
    st.none(),
    st.sampled_from(["peer", "completion", "user", "schedule", "system", "event", "trusted", "untrusted"]).flatmap(
        lambda w: st.sampled_from([w, w.upper(), w.title(), f" {w}", f"{w}\x00"])
    ),
    st.text(max_size=20),
)


@given(header_values, header_values)
def test_no_header_combination_launders(origin: str | None, trust: str | None) -> None:
    p = Provenance.from_wire(origin, trust)
    assert p.origin not in (Origin.USER, Origin.SCHEDULE, Origin.SYSTEM)
    if p.trust is Trust.TRUSTED:
        assert p.origin in (Origin.PEER, Origin.COMPLETION)
        assert trust is not None and trust.lower() == "trusted"
    if p.origin is Origin.EVENT:
        assert p.trust is Trust.UNTRUSTED
        assert p.lane is Lane.BG
    assert p.lane is not Lane.USER


@given(header_values)
def test_trust_header_not_read_without_wire_origin(trust: str | None) -> None:
    for origin in (None, "user", "system", "schedule", "event", "nonsense"):
        assert Provenance.from_wire(origin, trust) == Provenance.from_wire(origin, None)


def test_local_user() -> None:
    p = Provenance.local_user()
    assert (p.origin, p.trust, p.lane) == (Origin.USER, Trust.TRUSTED, Lane.USER)


DERIVED = "Provenance is derived: use Provenance.from_wire() or Provenance.local_user()"


def test_sealed_value_object() -> None:
    with pytest.raises(TypeError) as ei:
        Provenance(Origin.USER, Trust.TRUSTED)
    assert str(ei.value) == DERIVED
    for seal in (object(), None):
        with pytest.raises(TypeError) as ei:
            Provenance._derive(Origin.USER, Trust.TRUSTED, seal)
        assert str(ei.value) == DERIVED
    p = Provenance.from_wire("peer", "trusted")
    with pytest.raises(AttributeError, match=r"^Provenance is immutable$"):
        p._trust = Trust.UNTRUSTED
    with pytest.raises(AttributeError, match=r"^Provenance is immutable$"):
        p.origin = Origin.USER  # type: ignore[misc]
    for name in ("_trust", "_origin", "origin"):
        with pytest.raises(AttributeError) as ei:
            delattr(p, name)
        assert str(ei.value) == "Provenance is immutable"
    assert (p.origin, p.trust) == (Origin.PEER, Trust.TRUSTED)
    with pytest.raises(TypeError) as ei:
        pickle.dumps(p)
    assert str(ei.value) == "Provenance cannot be pickled; derive it again"
    assert p == Provenance.from_wire("PEER", "TRUSTED") and hash(p) == hash(Provenance.from_wire("peer", "trusted"))
    assert p != Provenance.from_wire("peer", None)
    # Against anything else, equality defers (NotImplemented) instead of reading its fields.
    assert p != "peer" and p != object() and p != (Origin.PEER, Trust.TRUSTED)
    assert p.__eq__("peer") is NotImplemented
    assert repr(p) == "Provenance(origin='peer', trust='trusted')"


@pytest.mark.parametrize(
    ("origin", "lane"),
    [
        (Origin.USER, Lane.USER),
        (Origin.PEER, Lane.PEER),
        (Origin.SCHEDULE, Lane.BG),
        (Origin.EVENT, Lane.BG),
        (Origin.COMPLETION, Lane.BG),
        (Origin.SYSTEM, Lane.BG),
    ],
)
def test_lane_for(origin: Origin, lane: Lane) -> None:
    assert lane_for(origin) is lane


def test_lane_order() -> None:
    assert LANE_ORDER == (Lane.USER, Lane.PEER, Lane.BG)


def test_outbound_headers() -> None:
    assert outbound_headers(Origin.PEER, Trust.UNTRUSTED) == {
        "x-murmur-task-origin": "peer",
        "x-murmur-task-trust": "untrusted",
    }
    assert outbound_headers(Origin.COMPLETION, Trust.TRUSTED)["x-murmur-task-origin"] == "completion"
    with pytest.raises(ValueError, match="cannot be sent"):
        outbound_headers(Origin.USER, Trust.TRUSTED)

"""The relay's seal (pure): what verifies, and that every covered field matters."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a.protocol import seal

KEY = bytes(range(32))
FIELDS = {"origin": "peer", "trust": "trusted", "traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}


def _make(**over: str) -> str:
    args = {"sender": "ses_a", "receiver": "ses_b", "subject": "msg-1", **FIELDS, **over}
    return seal.seal(KEY, **args)


def _check(value: str | None, key: bytes | None = KEY, **over: str) -> str | None:
    args = {"receiver": "ses_b", "subject": "msg-1", **FIELDS, **over}
    return seal.verify(key, value, **args)


def test_round_trip_names_the_sender() -> None:
    assert _check(_make()) == "ses_a"
    assert _check(_make(origin="PEER", trust="Trusted")) == "ses_a"  # the header spelling is folded


@pytest.mark.parametrize(
    "over",
    [
        {"receiver": "ses_c"},
        {"subject": "msg-2"},
        {"origin": "completion"},
        {"trust": "untrusted"},
        {"traceparent": "00-" + "c" * 32 + "-" + "b" * 16 + "-01"},
    ],
)
def test_every_field_is_covered(over: dict[str, str]) -> None:
    assert _check(_make(), **over) is None


def test_wrong_key_missing_parts_and_garbage() -> None:
    good = _make()
    assert _check(good, key=b"x" * 32) is None
    assert _check(good, key=None) is None
    assert _check(None) is None
    assert seal.verify(KEY, good, receiver="ses_b", origin=None, trust="trusted", traceparent=None, subject="m") is None
    for bad in ("", "v2", "v2.ses_a", "v1" + good[2:], good[:-1], good.replace("ses_a", "ses_x"), "v1..abc"):
        assert _check(bad) is None, bad


def test_door_keys_differ_per_session() -> None:
    assert seal.door_key(KEY, "ses_a") != seal.door_key(KEY, "ses_b")
    assert len(seal.door_key(KEY, "ses_a")) == 32


@given(st.text(max_size=40), st.text(max_size=40), st.text(min_size=1, max_size=40).filter(lambda s: "." not in s))
def test_property_only_the_exact_values_verify(subject: str, other: str, sender: str) -> None:
    value = _make(subject=subject, sender=sender)
    assert _check(value, subject=subject) == sender
    if other != subject:
        assert _check(value, subject=other) is None

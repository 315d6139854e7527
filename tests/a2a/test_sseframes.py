"""The SSE framing reader (a2a/protocol/sseframes.py): any split of the bytes gives the same events."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a.protocol import sseframes
from a2a.protocol.sseframes import SseParser

BODY = (
    b': hello\r\ndata: {"a":1}\r\n\r\n'
    b"event: x\ndata: one\ndata: two\n\n"
    b"id: 3\rdata:three\r\r: heartbeat\n\ndata: last\n\n"
)
EVENTS = [b'{"a":1}', b"one\ntwo", b"three", b"last"]


def test_events_comments_and_line_ends() -> None:
    assert SseParser().feed(BODY) == EVENTS


@given(st.lists(st.integers(0, len(BODY)), max_size=12))
def test_any_split_gives_the_same_events(cuts: list[int]) -> None:
    parser = SseParser()
    out: list[bytes] = []
    edges = sorted({0, len(BODY), *cuts})
    for a, b in itertools.pairwise(edges):
        out += parser.feed(BODY[a:b])
    assert out == EVENTS


def test_an_event_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sseframes, "MAX_EVENT_BYTES", 64)
    parser = SseParser()
    with pytest.raises(ValueError, match="larger than"):
        parser.feed(b"data: " + b"x" * 40 + b"\ndata: " + b"y" * 40 + b"\n")
    with pytest.raises(ValueError, match="larger than"):
        SseParser().feed(b"data: " + b"z" * 100)  # no line end yet: still bounded

"""W3C Trace Context level 1 parsing, continuation and tracestate validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a.protocol import traceparent
from a2a.protocol.traceparent import TraceParent

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
hex_chars = st.text(alphabet="0123456789abcdef", min_size=1, max_size=1)


def hexes(n: int) -> st.SearchStrategy[str]:
    return st.text(alphabet="0123456789abcdef", min_size=n, max_size=n)


def test_parse_valid() -> None:
    tp = traceparent.parse(VALID)
    assert tp == TraceParent("00", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "01")
    assert tp is not None and tp.sampled and tp.format() == VALID and str(tp) == VALID


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        VALID.upper(),
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
        VALID[:-1],
        VALID + "0",
        VALID + "-extra",  # version 00 must be exactly 55 chars
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-701",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ],
)
def test_parse_invalid(value: str | None) -> None:
    assert traceparent.parse(value) is None


def test_higher_versions() -> None:
    base = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert traceparent.parse(base) is not None
    tp = traceparent.parse(base + "-whatever-comes-next")
    assert tp is not None and tp.version == "01" and tp.flags == "01"
    assert tp.format().startswith("00-")  # we only emit version 00
    assert traceparent.parse(base + "x") is None  # field not followed by "-" or end
    assert traceparent.parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09") is not None


def test_flags_ff_are_kept_and_sampled() -> None:
    tp = traceparent.parse(VALID[:-2] + "ff")
    assert tp is not None and tp.flags == "ff" and tp.sampled
    assert tp.format() == VALID[:-2] + "ff" and tp.child().flags == "ff"


def test_flags_are_a_mask() -> None:
    tp = traceparent.parse(VALID[:-2] + "03")
    assert tp is not None and tp.sampled
    tp = traceparent.parse(VALID[:-2] + "02")
    assert tp is not None and not tp.sampled
    child = tp.child()
    assert child.flags == "02"


def test_new_and_child() -> None:
    tp = traceparent.new()
    assert tp.version == "00" and tp.flags == "01"
    assert traceparent.parse(tp.format()) == tp
    child = tp.child()
    assert child.trace_id == tp.trace_id and child.parent_id != tp.parent_id
    assert len({traceparent.new().trace_id for _ in range(50)}) == 50
    for made in (tp, child, traceparent.parse(child.format())):  # built without the class's own __new__
        assert type(made) is TraceParent and str(made) == made.format()
        assert made == TraceParent(made.version, made.trace_id, made.parent_id, made.flags)


@given(hexes(32), hexes(16), hexes(2))
def test_round_trip(trace_id: str, span_id: str, flags: str) -> None:
    value = f"00-{trace_id}-{span_id}-{flags}"
    tp = traceparent.parse(value)
    if set(trace_id) == {"0"} or set(span_id) == {"0"}:
        assert tp is None
    else:
        assert tp is not None and tp.format() == value
        child = tp.child()
        assert child.trace_id == trace_id and child.flags == flags
        assert child.parent_id != "0" * 16 and traceparent.parse(child.format()) == child


@given(st.text(max_size=80))
def test_arbitrary_text_never_crashes_and_results_are_valid(value: str) -> None:
    tp = traceparent.parse(value)
    if tp is not None:
        assert tp.trace_id != "0" * 32 and tp.parent_id != "0" * 16
        assert tp.version != "ff" and tp.format() == tp.format().lower()


@given(hexes(32), hexes(16), st.integers(min_value=0, max_value=54))
def test_uppercase_and_wrong_length_rejected(trace_id: str, span_id: str, cut: int) -> None:
    value = f"00-{trace_id}-{span_id}-01"
    if any(c in "abcdef" for c in value):
        assert traceparent.parse(value.upper()) is None
    assert traceparent.parse(value[:cut]) is None
    assert traceparent.parse(value + "0") is None


@given(hexes(32), hexes(16))
def test_version_ff_rejected(trace_id: str, span_id: str) -> None:
    assert traceparent.parse(f"ff-{trace_id}-{span_id}-01") is None


def test_new_ids_never_zero() -> None:
    for _ in range(200):
        tp = traceparent.new()
        assert tp.trace_id != "0" * 32 and tp.parent_id != "0" * 16


class _Source:
    """A random source that answers the given byte strings in turn (each cut to the size asked)."""

    def __init__(self, *answers: bytes) -> None:
        self.answers = list(answers)
        self.asked: list[int] = []

    def __call__(self, n: int) -> bytes:
        self.asked.append(n)
        return self.answers.pop(0)[:n]


ZERO, ONES, TWOS = bytes(32), b"\x11" * 32, b"\x22" * 32


@pytest.mark.parametrize(
    ("draws", "trace_id", "span_id", "asked"),
    [
        # Both ids drawn zero: each is drawn again, on its own, until it is not.
        ([bytes(24), ZERO, ONES, ZERO, TWOS], "11" * 16, "22" * 8, [24, 16, 16, 8, 8]),
        # Only the trace id is zero: the span id is kept.
        ([bytes(16) + b"\x33" * 8, ONES], "11" * 16, "33" * 8, [24, 16]),
        # Only the span id is zero: the trace id is kept.
        ([b"\x44" * 16 + bytes(8), ZERO, ONES], "44" * 16, "11" * 8, [24, 8, 8]),
        # Neither: one draw.
        ([b"\x44" * 16 + b"\x33" * 8], "44" * 16, "33" * 8, [24]),
    ],
)
def test_new_draws_again_when_an_id_is_all_zero(
    monkeypatch: pytest.MonkeyPatch, draws: list[bytes], trace_id: str, span_id: str, asked: list[int]
) -> None:
    source = _Source(*draws)
    monkeypatch.setattr(traceparent, "random_bytes", source)
    tp = traceparent.new()
    assert (tp.version, tp.trace_id, tp.parent_id, tp.flags) == ("00", trace_id, span_id, "01")
    assert source.asked == asked and source.answers == []


def test_new_trace_and_span_ids_skip_all_zero_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    source = _Source(bytes(16), bytes(16), b"\x01" + bytes(15), bytes(8), b"\x00" * 7 + b"\x01")
    monkeypatch.setattr(traceparent, "random_bytes", source)
    assert traceparent.new_trace_id() == "01" + "00" * 15
    assert traceparent.new_span_id() == "00" * 7 + "01"
    assert source.asked == [16, 16, 16, 8, 8] and source.answers == []


@pytest.mark.parametrize(
    ("value", "members"),
    [
        (None, []),
        ("", []),
        ("congo=t61rcWkgMzE", [("congo", "t61rcWkgMzE")]),
        ("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", [("rojo", "00f067aa0ba902b7"), ("congo", "t61rcWkgMzE")]),
        ("a=1, b=2 ,,c=3", [("a", "1"), ("b", "2"), ("c", "3")]),
        ("tenant@vendor=x", [("tenant@vendor", "x")]),
        ("1abc=x", [("1abc", "x")]),
        ("k=a b", [("k", "a b")]),
        ("k=1X", [("k", "1X")]),
        ("\tk=v\t", [("k", "v")]),
        (",".join(f"k{i}=v" for i in range(32)), [(f"k{i}", "v") for i in range(32)]),
    ],
)
def test_tracestate_valid(value: str | None, members: list[tuple[str, str]]) -> None:
    assert traceparent.parse_tracestate(value) == members
    assert traceparent.valid_tracestate(value)


@pytest.mark.parametrize(
    "value",
    [
        "Bad=1",
        "k",
        "k=",
        "k=a,k=b",
        "k=a=b",
        "k=a,b",
        "k=" + "v" * 257,
        "=v",
        "k=\x7f",
        ",".join(f"k{i}=v" for i in range(33)),
        "a=1,\nb=2",
        "k\n=v",
        "k=v\n",
        "k=v\r",
    ],
)
def test_tracestate_invalid(value: str) -> None:
    assert traceparent.parse_tracestate(value) is None
    assert not traceparent.valid_tracestate(value)

"""decode_body answers what json.loads answers: the same value, or a refusal with its sentence."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a.protocol.jsonrpc import has_long_digit_run
from roost.http.jsonbody import BodyError, decode_body


def stdlib(raw: bytes) -> tuple[str, Any]:
    try:
        return "ok", json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return "err", str(exc)


def ours(raw: bytes) -> tuple[str, Any]:
    try:
        return "ok", decode_body(raw)
    except BodyError as exc:
        return "err", str(exc)


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (1 is not 1.0, NaN equals NaN, -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def agree(raw: bytes) -> None:
    theirs, mine = stdlib(raw), ours(raw)
    assert theirs[0] == mine[0], (raw, theirs, mine)
    if theirs[0] == "ok":
        assert same(theirs[1], mine[1]), (raw, theirs, mine)
    else:
        assert theirs[1] == mine[1]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"name":"worker","version":"0.1.0"}',
        b'{"a":1,"a":2}',
        b"\xef\xbb\xbf{}",  # a UTF-8 byte-order mark: the stdlib reads it
        b'{"a":"\\ud800"}',  # a lone surrogate escape: orjson refuses, the stdlib reads it
        b'"\xed\xa0\x80"',  # a surrogate encoded in UTF-8
        b"NaN",
        b"[Infinity,-Infinity]",
        b"1e400",
        b"18446744073709551616",  # wider than 64 bits: orjson would make it a float
        b"-9223372036854775809",
        b"9223372036854775807",
        b'{"pid":123456789012345678901234567890}',
        b'{"s":"1234567890123456789012"}',  # long digits in a string: the stdlib answers the same
        b"-0",
        b"-0.0",
        b"0.1",
        b'"\x01"',
        b'{"a":"\x7f"}',
        b"",
        b"{",
        b"{}{}",
        b"\xff",
        '{"a":"é"}'.encode("utf-16"),
        '{"a":"é"}'.encode("utf-32-le"),
        b" \n{} \t",
    ],
)
def test_agrees_with_the_stdlib_on_edges(raw: bytes) -> None:
    agree(raw)


def test_nesting_past_the_stdlib_is_a_refusal_not_a_crash() -> None:
    raw = b"[" * 50_000 + b"]" * 50_000
    with pytest.raises(BodyError, match="nested too deeply"):
        decode_body(raw)
    assert decode_body(b"[" * 200 + b"]" * 200) == json.loads(b"[" * 200 + b"]" * 200)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=500)
@given(json_values, st.booleans())
def test_agrees_on_any_document_the_stdlib_writes(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    agree(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=500)
@given(st.binary(max_size=64))
def test_agrees_on_any_bytes(raw: bytes) -> None:
    agree(raw)


@settings(max_examples=300)
@given(json_values, st.binary(max_size=3), st.integers(min_value=0, max_value=200))
def test_agrees_on_damaged_documents(value: Any, junk: bytes, at: int) -> None:
    raw = json.dumps(value).encode("utf-8", "surrogatepass")
    at = min(at, len(raw))
    agree(raw[:at] + junk + raw[at:])


_PIECES = [b"0", b"7", b"9", b"a", b"/", b":", b" ", b"\xff", b"1" * 18, b"5" * 19]


@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_the_long_digit_run_check_is_the_regex_it_replaces(pieces: list[bytes]) -> None:
    raw = b"".join(pieces)
    assert has_long_digit_run(raw) == (re.search(rb"[0-9]{19}", raw) is not None)


def test_a_wide_integer_anywhere_is_read_as_the_stdlib_reads_it() -> None:
    raw = b'{"a": "x", "n": 1234567890123456789012}'
    assert decode_body(raw) == {"a": "x", "n": 1234567890123456789012}
    assert type(decode_body(raw)["n"]) is int  # type: ignore[index]

"""The identifier grammar: exhaustive cases and properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.core.errors import BadRequest
from roost.core.ids import MAX_IDENTIFIER_BYTES, identifier_problem, is_identifier, require_id

HOSTILE = [
    "",
    "   ",
    "/abs/path",
    "../../x",
    "a/b",
    "a\\b",
    "..",
    ".",
    "a..b",
    "a\x00b",
    "\x00",
    "a\nb",
    "a\rb",
    "\x1b[31m",
    "a\x7fb",
    "a\x85b",
    "a\u2028b",
    "x" * (MAX_IDENTIFIER_BYTES + 1),
    "é" * (MAX_IDENTIFIER_BYTES // 2 + 1),
    "\udcff",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_values_are_refused_with_a_sentence(value: str) -> None:
    problem = identifier_problem(value)
    assert problem is not None and problem.startswith("must ")
    with pytest.raises(BadRequest) as info:
        require_id("session_id", value)
    assert info.value.status == 400
    assert info.value.message == f"session_id {problem}"


@pytest.mark.parametrize(
    "value", ["ses_0123abcd", "job_" + "a" * 32, "dlg_x", "worker", "0.1.0", "1.2.3-rc.1+build.5", "a.b", ".hidden"]
)
def test_ordinary_values_pass(value: str) -> None:
    assert identifier_problem(value) is None
    assert require_id("x", value) == value


def test_length_is_counted_in_bytes() -> None:
    assert is_identifier("x" * MAX_IDENTIFIER_BYTES)
    assert not is_identifier("x" * (MAX_IDENTIFIER_BYTES + 1))
    assert is_identifier("é" * (MAX_IDENTIFIER_BYTES // 2))
    assert not is_identifier(5)


@given(st.text(max_size=300))
def test_anything_accepted_is_one_safe_path_component(value: str) -> None:
    if identifier_problem(value) is None:
        assert value.strip()
        assert "/" not in value and "\\" not in value and "\x00" not in value
        assert value not in (".", "..") and ".." not in value
        assert all(ord(c) >= 0x20 and not 0x7F <= ord(c) < 0xA0 for c in value)
        assert len(value.encode("utf-8")) <= MAX_IDENTIFIER_BYTES


@given(
    st.text(
        alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, blacklist_characters="/\\."),
        min_size=1,
        max_size=MAX_IDENTIFIER_BYTES,
    )
)
def test_printable_ascii_without_separators_passes(value: str) -> None:
    assert identifier_problem(value) is None


@given(st.text(max_size=40), st.sampled_from(["/", "\\", "\x00", "..", "\n", "\x7f"]), st.text(max_size=40))
def test_a_forbidden_piece_anywhere_is_refused(before: str, bad: str, after: str) -> None:
    assert identifier_problem(before + bad + after) is not None

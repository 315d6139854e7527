"""The formation id's grammar and refusals (roost/core/formation.py): upstream's, strict."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.core.errors import BadRequest
from roost.core.fields import optional_formation
from roost.core.formation import env_refusal, formation_problem

GOOD = "frm_019f01a93ff27c1e9a3b5d0c4e8f2a61"


@given(st.text(alphabet="0123456789abcdef", min_size=32, max_size=32))
def test_frm_and_32_lowercase_hex_is_a_formation_id(digits: str) -> None:
    assert formation_problem("frm_" + digits) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("dlg_" + GOOD[4:], "it does not start with 'frm_'"),
        ("frm_", "'frm_' must be followed by exactly 32 hex digits"),
        (GOOD + "0", "'frm_' must be followed by exactly 32 hex digits"),
        ("frm_" + GOOD[4:].upper(), "it contains a character outside lowercase hex (0-9, a-f)"),
        (" " + GOOD, "it does not start with 'frm_'"),
    ],
)
def test_near_misses_are_refused_with_upstreams_reasons_never_the_value(value: str, reason: str) -> None:
    assert formation_problem(value) == reason
    sentence = env_refusal(reason)
    assert sentence.startswith("E-RUN-044: MURMUR_FORMATION_ID is not a formation id: ")
    if value.strip() != "frm_":
        assert value.strip() not in sentence
    with pytest.raises(BadRequest, match="formation_id is not a formation id"):
        optional_formation({"formation_id": value}, "formation_id")


def test_an_absent_formation_is_none() -> None:
    assert optional_formation({}, "formation_id") is None
    assert optional_formation({"formation_id": None}, "formation_id") is None
    assert optional_formation({"formation_id": GOOD}, "formation_id") == GOOD
    with pytest.raises(BadRequest, match="formation_id must be a string"):
        optional_formation({"formation_id": 7}, "formation_id")

"""Identifiers: UUIDv7 shape, and strictly increasing in mint order whether minted alone or in pairs."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from a2a import ids

UUID7 = re.compile(r"[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}")


def _mint(kinds: list[str]) -> list[str]:
    out: list[str] = []
    for kind in kinds:
        if kind == "pair":
            a, b = ids.prefixed_pair("tsk", "ctx")
            assert a.startswith("tsk_") and b.startswith("ctx_")
            out += [a.split("_", 1)[1], b.split("_", 1)[1]]
        else:
            out.append(ids.uuid7_hex())
    return out


@given(st.lists(st.sampled_from(["one", "pair"]), min_size=1, max_size=40), st.integers(0, 0xFFF))
def test_ids_are_uuid7_and_strictly_increasing(kinds: list[str], seq: int) -> None:
    ids._seq = seq  # wherever the sequence stands, a near-full one included, order holds
    minted = _mint(kinds)
    assert all(UUID7.fullmatch(x) for x in minted), minted
    assert minted == sorted(minted) and len(set(minted)) == len(minted)


def test_a_pair_differs_in_its_random_bits() -> None:
    a, b = ids.prefixed_pair("tsk", "ctx")
    assert a[-15:] != b[-15:]

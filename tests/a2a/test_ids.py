"""Identifiers: UUIDv7 shape, and strictly increasing in mint order whether minted alone or in pairs."""

from __future__ import annotations

import re
import time

from hypothesis import given
from hypothesis import strategies as st

from a2a.protocol import ids

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


def test_the_millisecond_field_is_the_mint_time() -> None:
    # Earlier tests push the sequence over its end, which moves the field ahead of the clock
    # (by design: ids stay ordered); let the clock catch up first.
    time.sleep(max(0, ids._last_ms + 2 - time.time_ns() // 1_000_000) / 1000)
    for _ in range(3):
        before = time.time_ns() // 1_000_000
        one, (two, three) = ids.uuid7_hex(), ids.prefixed_pair("tsk", "ctx")
        after = time.time_ns() // 1_000_000
        for minted in (one, two.split("_", 1)[1], three.split("_", 1)[1]):
            # the sequence can carry into the next millisecond, never further than one ahead
            assert before <= int(minted[:12], 16) <= after + 1, (before, minted, after)
        time.sleep(0.002)  # the next round mints in a later millisecond: a fresh stamp

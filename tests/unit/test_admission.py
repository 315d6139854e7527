"""The one top-level admission decision and each edge's rendering of it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.admission import CeilingReached, Draining, NotInSpawnAllow, Refusal, admit_top_level
from roost.errors import Refused
from roost.refusals import DRAINING_LAUNCH, for_launch, for_register, refusals

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=12)


def test_admits_an_allowed_capsule_under_the_ceiling() -> None:
    assert (
        admit_top_level("worker", draining=False, spawn_allow={"worker"}, live_capsules=1, max_live_capsules=2) is None
    )


def test_admits_without_a_ceiling_when_no_live_count_is_given() -> None:
    assert admit_top_level("worker", draining=False, spawn_allow=("worker",)) is None


def test_draining_comes_first() -> None:
    got = admit_top_level("stranger", draining=True, spawn_allow=(), live_capsules=9, max_live_capsules=1)
    assert got == Draining()


def test_allow_list_comes_before_the_ceiling() -> None:
    got = admit_top_level("stranger", draining=False, spawn_allow=("worker",), live_capsules=9, max_live_capsules=1)
    assert got == NotInSpawnAllow("stranger")


@pytest.mark.parametrize(("live", "limit"), [(2, 2), (3, 2), (0, 0)])
def test_ceiling_at_or_above_the_limit(live: int, limit: int) -> None:
    got = admit_top_level(
        "worker", draining=False, spawn_allow=("worker",), live_capsules=live, max_live_capsules=limit
    )
    assert got == CeilingReached(limit, live)


def test_one_below_the_ceiling_is_admitted() -> None:
    assert (
        admit_top_level("worker", draining=False, spawn_allow=("worker",), live_capsules=1, max_live_capsules=2) is None
    )


def test_the_allow_list_matches_whole_names_only() -> None:
    assert admit_top_level("work", draining=False, spawn_allow=["worker"]) == NotInSpawnAllow("work")


@given(
    name=names,
    allow=st.frozensets(names, max_size=5),
    draining=st.booleans(),
    live=st.none() | st.integers(min_value=0, max_value=50),
    limit=st.integers(min_value=0, max_value=50),
)
def test_the_decision_is_the_first_failing_check_in_order(
    name: str, allow: frozenset[str], draining: bool, live: int | None, limit: int
) -> None:
    got = admit_top_level(name, draining=draining, spawn_allow=allow, live_capsules=live, max_live_capsules=limit)
    if draining:
        assert got == Draining()
    elif name not in allow:
        assert got == NotInSpawnAllow(name)
    elif live is not None and live >= limit:
        assert got == CeilingReached(limit, live)
    else:
        assert got is None


@given(
    name=names,
    allow=st.frozensets(names, max_size=5),
    live=st.integers(min_value=0, max_value=50),
    limit=st.integers(min_value=0, max_value=50),
)
def test_skipping_the_ceiling_only_ever_admits_more(name: str, allow: frozenset[str], live: int, limit: int) -> None:
    with_ceiling = admit_top_level(name, draining=False, spawn_allow=allow, live_capsules=live, max_live_capsules=limit)
    without = admit_top_level(name, draining=False, spawn_allow=allow)
    assert without is None or without == with_ceiling
    assert not isinstance(without, CeilingReached)


def test_refusals_are_values() -> None:
    assert CeilingReached(2, 3) == CeilingReached(2, 3)
    assert CeilingReached(2, 3) != CeilingReached(3, 2)
    assert hash(NotInSpawnAllow("a")) == hash(NotInSpawnAllow("a"))
    with pytest.raises(AttributeError):
        NotInSpawnAllow("a").name = "b"  # type: ignore[misc]


# -- rendering -------------------------------------------------------------------------------------

REGISTER_SENTENCES: list[tuple[Refusal, str, str]] = [
    (
        Draining(),
        "this daemon is draining: it finishes running jobs and registers no new top-level sessions",
        "draining",
    ),
    (NotInSpawnAllow("worker"), "capsule 'worker' is not in --spawn-allow", "spawn_allow"),
    (
        CeilingReached(2, 3),
        "machine capsule ceiling reached: this daemon allows 2 live capsules on this host across every "
        "formation (--max-live-capsules 2), and it is already holding 3 — this is the host's ceiling rather "
        "than this capsule's own --max-concurrent, so narrowing the formation does not help; the same request "
        "may be granted once other capsules finish",
        "ceiling",
    ),
]


@pytest.mark.parametrize(("refusal", "sentence", "kind"), REGISTER_SENTENCES)
def test_register_renders_upstreams_sentences(refusal: Refusal, sentence: str, kind: str) -> None:
    err = for_register(refusal)
    assert type(err) is Refused
    assert (err.message, err.kind, err.status) == (sentence, kind, 403)


LAUNCH_SENTENCES: list[tuple[Refusal, str]] = [
    (Draining(), "this daemon is draining: it finishes running jobs and starts no new ones"),
    (NotInSpawnAllow("worker"), "capsule 'worker' is not in --spawn-allow"),
    (CeilingReached(4, 4), refusals.ceiling(4, 4)),
]


@pytest.mark.parametrize(("refusal", "sentence"), LAUNCH_SENTENCES)
def test_launch_renders_its_own_sentences(refusal: Refusal, sentence: str) -> None:
    err = for_launch(refusal)
    assert type(err) is Refused
    assert (err.message, err.status) == (sentence, 403)


def test_the_edges_differ_only_in_the_draining_sentence() -> None:
    assert for_launch(Draining()).message == DRAINING_LAUNCH != for_register(Draining()).message
    for refusal in (NotInSpawnAllow("x"), CeilingReached(1, 1)):
        assert for_launch(refusal).message == for_register(refusal).message
        assert for_launch(refusal).kind == for_register(refusal).kind


def test_upstream_spawn_draining_sentence() -> None:
    assert refusals.DRAINING_SPAWN == "this daemon is draining: it finishes running jobs and grants no new spawns"


@given(name=names, limit=st.integers(min_value=0, max_value=10**6), live=st.integers(min_value=0, max_value=10**6))
def test_rendered_sentences_carry_the_values(name: str, limit: int, live: int) -> None:
    assert f"'{name}'" in for_register(NotInSpawnAllow(name)).message
    msg = for_register(CeilingReached(limit, live)).message
    assert f"allows {limit} live capsules" in msg and f"already holding {live} " in msg

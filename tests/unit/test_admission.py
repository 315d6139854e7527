"""The one top-level admission decision and each edge's rendering of it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.core.admission import (
    CeilingReached,
    ConcurrencyReached,
    DepthExhausted,
    Draining,
    NotInSpawnAllow,
    Refusal,
    SpawnLimits,
    SpawnRefusal,
    UidSessionsReached,
    admit_spawn,
    admit_top_level,
)
from roost.core.errors import Refused
from roost.core.refusals import DRAINING_LAUNCH, for_launch, for_register, for_spawn, refusals

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


# -- delegated spawns ------------------------------------------------------------------------------

LIMITS = SpawnLimits(max_depth=3, max_live_capsules=10, max_concurrent=4, uid_live_sessions=6)


def spawn_state(**kw: int | None) -> dict[str, int | None]:
    state: dict[str, int | None] = {
        "depth_remaining": 2,
        "live_capsules": 0,
        "live_children": 0,
        "uid": 7,
        "uid_live": 0,
    }
    state.update(kw)
    return state


def test_a_spawn_within_every_bound_is_admitted() -> None:
    assert admit_spawn(LIMITS, **spawn_state(live_capsules=9, live_children=3, uid_live=5)) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (spawn_state(depth_remaining=0, live_capsules=99, live_children=99, uid_live=99), DepthExhausted(3)),
        (spawn_state(depth_remaining=-1), DepthExhausted(3)),
        (spawn_state(live_capsules=10, live_children=99, uid_live=99), CeilingReached(10, 10)),
        (spawn_state(live_children=4, uid_live=99), ConcurrencyReached(4, 4)),
        (spawn_state(uid_live=6), UidSessionsReached(7, 6, 6)),
        (spawn_state(uid=None, uid_live=8), UidSessionsReached(None, 6, 8)),
    ],
)
def test_the_first_broken_bound_is_named_in_upstream_order(state: dict[str, Any], expected: SpawnRefusal) -> None:
    assert admit_spawn(LIMITS, **state) == expected


@given(
    depth=st.integers(-2, 4),
    live=st.integers(0, 20),
    kids=st.integers(0, 8),
    uid_live=st.integers(0, 10),
    uid=st.none() | st.integers(0, 70000),
    limits=st.builds(SpawnLimits, st.integers(0, 5), st.integers(0, 20), st.integers(0, 8), st.integers(0, 10)),
)
def test_spawn_decision_matches_the_checks_in_order(
    depth: int, live: int, kids: int, uid_live: int, uid: int | None, limits: SpawnLimits
) -> None:
    got = admit_spawn(limits, depth_remaining=depth, live_capsules=live, live_children=kids, uid=uid, uid_live=uid_live)
    if depth <= 0:
        assert got == DepthExhausted(limits.max_depth)
    elif live >= limits.max_live_capsules:
        assert got == CeilingReached(limits.max_live_capsules, live)
    elif kids >= limits.max_concurrent:
        assert got == ConcurrencyReached(limits.max_concurrent, kids)
    elif uid_live >= limits.uid_live_sessions:
        assert got == UidSessionsReached(uid, limits.uid_live_sessions, uid_live)
    else:
        assert got is None


SPAWN_SENTENCES: list[tuple[SpawnRefusal, str, str]] = [
    (DepthExhausted(2), refusals.depth(2), "depth"),
    (CeilingReached(2, 2), refusals.ceiling(2, 2), "ceiling"),
    (
        ConcurrencyReached(2, 3),
        "delegation concurrency bound reached: this daemon allows a capsule 2 live children at a time "
        "(--max-concurrent 2), and this session already holds 3 — wait for one to finish, or raise --max-concurrent",
        "concurrency",
    ),
    (UidSessionsReached(1000, 5, 5), refusals.uid_sessions(1000, 5, 5), "quota_sessions"),
]


@pytest.mark.parametrize(("refusal", "sentence", "kind"), SPAWN_SENTENCES)
def test_spawn_renders_upstreams_sentences(refusal: SpawnRefusal, sentence: str, kind: str) -> None:
    err = for_spawn(refusal)
    assert type(err) is Refused
    assert (err.message, err.kind, err.status) == (sentence, kind, 403)


def test_the_depth_sentence_is_upstreams() -> None:
    assert refusals.depth(1) == (
        "delegation depth bound reached: this daemon allows 1 levels of delegation below a top-level capsule "
        "(--max-depth 1), and this session has none left to spend — a capsule whose capabilities.spawn.allow "
        "names itself terminates here rather than recursing"
    )

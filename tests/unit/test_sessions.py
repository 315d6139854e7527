"""The reservation table against a plain model: holds, releases, and expiry in any clock order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from roost.state.sessions import Reservation, SessionTable, Slot


def slot(jti: str, parent: str, exp: int) -> Slot:
    return (jti, parent, "worker", "0.1.0", "0" * 64, 1, "trusted", exp, None)


def test_slots_expire_in_grant_order_and_counts_follow() -> None:
    table = SessionTable()
    for i in range(5):
        table.reserve(slot(f"j{i}", "ses_a" if i % 2 else "ses_b", 1000 + i))
    assert (table.live_capsules(), table.live_children("ses_a"), table.live_children("ses_b")) == (5, 2, 3)
    assert table.next_expiry_ms == 1000
    assert table.prune(999) == 0
    assert table.prune(1002) == 3  # exp <= now expires, as the approval's own check does
    assert sorted(table.reservations) == ["j3", "j4"]
    assert (table.live_children("ses_a"), table.live_children("ses_b")) == (1, 1)
    assert table.next_expiry_ms == 1003
    assert table.prune(10**6) == 2 and table.next_expiry_ms == float("inf")
    assert table.reservations_of == {}


def test_a_clock_stepping_back_still_expires_everything_on_time() -> None:
    table = SessionTable()
    table.reserve(slot("late1", "p", 5000))
    table.reserve(slot("early", "p", 2000))  # granted after a backwards clock step
    table.reserve(slot("late2", "p", 5001))
    assert table.next_expiry_ms == 2000
    assert table.prune(2000) == 1 and set(table.reservations) == {"late1", "late2"}
    assert table.prune(5001) == 2


def test_a_released_slot_is_not_expired_twice_and_lingering_entries_are_dropped() -> None:
    table = SessionTable()
    for i in range(3000):
        table.reserve(slot(f"j{i}", "p", 10_000 + i))
    for i in range(2990):
        released = table.release(f"j{i}")
        assert released == Reservation(*slot(f"j{i}", "p", 10_000 + i))
    assert table.release("j0") is None
    table.reserve(slot("new", "p", 20_000))  # queued entries past 2x the held ones: rebuilt
    assert len(table._expiry) + len(table._late) == 11
    assert table.prune(10**6) == 11 and table.live_capsules() == 0


ops = st.lists(
    st.one_of(
        st.tuples(st.just("reserve"), st.integers(0, 40), st.sampled_from(["p", "q"])),
        st.tuples(st.just("release"), st.integers(0, 60), st.just("")),
        st.tuples(st.just("prune"), st.integers(0, 40), st.just("")),
    ),
    max_size=80,
)


@settings(max_examples=1000)
@given(ops)
def test_matches_a_plain_model_whatever_the_clock_does(script: list[tuple[str, int, str]]) -> None:
    table = SessionTable()
    model: dict[str, tuple[int, str]] = {}
    for n, (op, value, parent) in enumerate(script):
        if op == "reserve":
            jti = f"j{n}"
            table.reserve(slot(jti, parent, value))
            model[jti] = (value, parent)
        elif op == "release":
            jti = f"j{value}"
            assert (table.release(jti) is not None) == (jti in model)
            model.pop(jti, None)
        else:
            gone = [j for j, (exp, _) in model.items() if exp <= value]
            assert table.prune(value) == len(gone)
            for j in gone:
                del model[j]
            # Never later than a held slot's expiry (a released one may still be queued earlier).
            assert table.next_expiry_ms <= min((exp for exp, _ in model.values()), default=float("inf"))
        assert set(table.reservations) == set(model)
        for p in ("p", "q"):
            assert table.live_children(p) == sum(1 for _, owner in model.values() if owner == p)


# -- spent approval ids ---------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([f"j{i}" for i in range(12)]), st.integers(1, 5_000), st.integers(0, 3_000)),
        max_size=60,
    )
)
def test_spend_matches_a_model(steps: list[tuple[str, int, int]]) -> None:
    """An id is refused while an earlier spend of it has not expired, and forgotten within the
    second after its expiry (an expired approval is refused before its id is looked at, so the
    slack is never visible; every ttl is positive because only a live approval is spent)."""
    table = SessionTable()
    exps: dict[str, int] = {}
    now = 0
    for jti, ttl, step in steps:
        now += step
        live = exps.get(jti, -1) > now
        fresh = table.spend(jti, now + ttl, now)
        if live:
            assert not fresh
        elif jti not in exps or exps[jti] // 1000 + 1 <= now // 1000:
            assert fresh
        if fresh:
            exps[jti] = now + ttl
        table.forget_spent(now)
        assert {k for k, e in exps.items() if e > now} <= set(table.spent)
        assert set(table.spent) <= {k for k, e in exps.items() if e > now - 1000}


def test_spent_ids_are_forgotten_by_expiry_second() -> None:
    table = SessionTable()
    for i in range(1000):
        assert table.spend(f"a{i}", 10_500, 0)
    assert table.spend("late", 70_000, 0)
    assert not table.spend("a1", 10_500, 9_000)
    assert table.forget_spent(10_499) == 0
    assert table.forget_spent(11_000) == 1000
    assert set(table.spent) == {"late"}
    assert table.spend("a1", 80_000, 11_000)  # expired ids may not come back, but the table allows it

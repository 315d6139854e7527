"""The pure pieces the referee keeps its session bounds in: lease expiries and the per-uid rate window."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roost.services.referee.leases import Leases
from roost.services.referee.quotas import WINDOW_MS, RegistrationRate


def test_a_lease_lapses_at_its_expiry_and_renewal_pushes_it() -> None:
    leases = Leases()
    leases.grant("s1", 1000, 500)
    assert leases.until == {"s1": 1500} and len(leases) == 1
    assert leases.lapsed(1499) == [] and leases.lapsed(1500) == ["s1"]
    assert leases.renew("s1", 1400, 500) == 1900
    assert leases.lapsed(1500) == [] and not leases.still_lapsed("s1", 1500)
    assert leases.still_lapsed("s1", 1900)
    assert leases.renew("nobody", 0, 500) is None and "nobody" not in leases.until
    leases.drop("s1")
    leases.drop("s1")
    assert len(leases) == 0 and not leases.still_lapsed("s1", 10**9)


ops = st.lists(
    st.tuples(st.sampled_from(["grant", "renew", "drop"]), st.sampled_from(["a", "b", "c"]), st.integers(0, 10_000)),
    max_size=30,
)


@given(ops, st.integers(1, 5000), st.integers(0, 20_000))
def test_leases_match_a_plain_model(steps: list[tuple[str, str, int]], lease_ms: int, probe: int) -> None:
    leases, model = Leases(), dict[str, int]()
    for op, sid, now in steps:
        if op == "grant":
            leases.grant(sid, now, lease_ms)
            model[sid] = now + lease_ms
        elif op == "renew":
            got = leases.renew(sid, now, lease_ms)
            if sid in model:
                model[sid] = now + lease_ms
                assert got == model[sid]
            else:
                assert got is None
        else:
            leases.drop(sid)
            model.pop(sid, None)
    assert leases.until == model
    assert sorted(leases.lapsed(probe)) == sorted(s for s, t in model.items() if t <= probe)
    for sid in "abc":
        assert leases.still_lapsed(sid, probe) == (sid in model and model[sid] <= probe)


def test_the_rate_window_admits_up_to_the_limit_per_minute() -> None:
    rate = RegistrationRate()
    assert [rate.admit(7, 1000 + i, 3) for i in range(4)] == [True, True, True, False]
    assert rate.admit(8, 1004, 3)  # another user has a window of their own
    assert not rate.admit(7, 1000 + WINDOW_MS - 1, 3)
    assert rate.admit(7, 1000 + WINDOW_MS, 3)  # the first stamp left the window


def test_a_limit_of_zero_or_less_admits_everyone_and_records_nothing() -> None:
    rate = RegistrationRate()
    assert all(rate.admit(None, i, 0) for i in range(100))
    assert rate.admit(1, 0, -1) and len(rate) == 0


def test_idle_users_are_forgotten_once_many_are_held() -> None:
    rate = RegistrationRate()
    for uid in range(5000):
        rate.admit(uid, 0, 1)
    assert len(rate) == 5000
    rate.admit(-1, WINDOW_MS + 1, 1)  # a new user past everyone's minute
    assert len(rate) == 1


@given(st.lists(st.tuples(st.sampled_from([None, 0, 1]), st.integers(0, 200_000)), max_size=40), st.integers(1, 4))
def test_rate_matches_a_plain_model(calls: list[tuple[int | None, int]], limit: int) -> None:
    rate = RegistrationRate()
    seen: dict[int | None, list[int]] = {}
    for uid, now in sorted(calls, key=lambda c: c[1]):
        recent = [t for t in seen.get(uid, []) if t > now - WINDOW_MS]
        expected = len(recent) < limit
        assert rate.admit(uid, now, limit) == expected
        seen[uid] = recent + ([now] if expected else [])

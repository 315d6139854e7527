"""roost.backends.ray.placement: whether a node's keeper can start a child as a session's uid."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from roost.backends.ray.placement import run_as_refusal, setid_capable

ALL_CAPS = "000001ffffffffff"


def status(eff: str) -> str:
    return f"Name:\tpython\nUid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\nCapEff:\t{eff}\nCapBnd:\t{eff}\n"


def test_effective_setuid_and_setgid_are_read_from_the_status_text() -> None:
    assert setid_capable(status(ALL_CAPS))
    assert setid_capable(status(f"{(1 << 6) | (1 << 7):016x}"))
    assert not setid_capable(status(f"{int(ALL_CAPS, 16) & ~(1 << 7):016x}"))  # no CAP_SETUID
    assert not setid_capable(status(f"{int(ALL_CAPS, 16) & ~(1 << 6):016x}"))  # no CAP_SETGID
    assert not setid_capable(status("0000000000000000"))
    assert not setid_capable("Name:\tpython\n")  # no CapEff line at all
    assert not setid_capable(status("zz"))


def test_this_process_status_parses() -> None:
    text = Path("/proc/self/status").read_text()
    assert setid_capable(text) in (True, False)
    assert "CapEff:" in text


def test_a_root_keeper_with_the_capabilities_starts_any_uid() -> None:
    assert run_as_refusal("n1", 65534, 0, True) is None
    assert run_as_refusal("n1", None, 1000, False) is None
    assert run_as_refusal("n1", 1000, 1000, False) is None


def test_a_root_keeper_without_the_capabilities_is_refused_with_the_fix() -> None:
    assert run_as_refusal("n1", 65534, 0, False) == (
        "the node keeper on Ray node n1 runs as root without CAP_SETUID/CAP_SETGID, so it cannot start "
        "a child as uid 65534 (the session's own); give that node's Ray those capabilities, or place this "
        "capsule on another node"
    )


def test_a_keeper_of_another_uid_is_refused_naming_both_uids() -> None:
    why = run_as_refusal("n1", 0, 1000, True)
    assert why is not None
    assert "runs as uid 1000, so it cannot start a child as uid 0" in why
    assert "start Ray on that node as root" in why


@given(uid=st.one_of(st.none(), st.integers(0, 2**32 - 2)), keeper=st.integers(0, 2**32 - 2), caps=st.booleans())
def test_refused_exactly_when_the_keeper_cannot_become_the_uid(uid: int | None, keeper: int, caps: bool) -> None:
    why = run_as_refusal("n1", uid, keeper, caps)
    can = uid is None or uid == keeper or (keeper == 0 and caps)
    assert (why is None) == can
    if why is not None:
        # The backend recognises the keeper's own refusal at start by this phrase.
        assert f"cannot start a child as uid {uid}" in why

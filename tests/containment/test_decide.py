"""The pure decision: which class a session runs under, and the E-CAP-003 sentence when none."""

from __future__ import annotations

import itertools

import pytest

from roost.capsule.probe import HostProbe, decide, refusal
from roost.core.manifest import CONTAINMENT_ORDER

CLASSES = ("advisory", "scoped", "sealed")


def probe(abi: int, userns: bool, bwrap: bool, cap: str | None = None) -> HostProbe:
    return HostProbe(
        landlock_abi=abi,
        landlock_reason=None if abi else "the kernel has no Landlock system calls",
        userns=userns,
        userns_grant="apparmor_absent" if userns else "withheld",
        userns_reason=None if userns else "unshare(CLONE_NEWUSER) failed: Operation not permitted",
        bwrap="/usr/bin/bwrap" if bwrap else None,
        cap=cap,  # type: ignore[arg-type]
    )


def test_offered_class_from_the_facts() -> None:
    assert probe(0, True, True).offered == "advisory"
    assert probe(7, False, True).offered == "scoped"
    assert probe(7, True, False).offered == "scoped"
    assert probe(1, True, True).offered == "sealed"
    assert probe(7, True, True, cap="scoped").offered == "scoped"
    assert probe(7, False, False, cap="sealed").offered == "scoped", "a cap never raises"


@pytest.mark.parametrize(
    ("abi", "userns", "bwrap", "cap", "declared", "workdir_exec"),
    list(itertools.product((0, 3, 7), (False, True), (False, True), (None, *CLASSES), CLASSES, (False, True))),
)
def test_every_combination(
    abi: int, userns: bool, bwrap: bool, cap: str | None, declared: str, workdir_exec: bool
) -> None:
    p = probe(abi, userns, bwrap, cap)
    d = decide(p, declared, workdir_exec=workdir_exec)  # type: ignore[arg-type]
    offered = "advisory" if workdir_exec else p.offered
    # Seed 000: containment_achieved is the class this host can enforce, capped by workdir_exec.
    assert d.enforceable == offered
    if CONTAINMENT_ORDER[declared] <= CONTAINMENT_ORDER[offered]:
        assert d.floor_met and d.achieved == declared and d.shortfall_reason is None
    else:
        assert not d.floor_met and d.achieved == offered and d.shortfall_reason
        text = refusal("cap@1.0.0", d)
        assert text.startswith("E-CAP-003: cap@1.0.0 declares capabilities.containment ")
        assert f"'{declared}'" in text and "refused" in text
        if workdir_exec and CONTAINMENT_ORDER[declared] <= CONTAINMENT_ORDER[p.offered]:
            assert "workdir_exec" in text
        elif cap is not None and CONTAINMENT_ORDER[cap] < CONTAINMENT_ORDER[declared]:
            assert "containment_max" in text
        elif abi == 0:
            assert "Landlock is unavailable" in text
        else:
            assert "user namespaces" in text or "bwrap" in text


def test_hints_name_what_would_raise_the_class() -> None:
    assert probe(7, True, True).raise_hints() == []
    hints = " ".join(probe(0, False, False, cap="advisory").raise_hints())
    assert "Landlock" in hints and "user namespaces" in hints and "bubblewrap" in hints
    assert "containment_max" not in hints, "the cap equals what the host can do: removing it raises nothing"
    assert "containment_max" in " ".join(probe(7, True, True, cap="scoped").raise_hints())


def test_a_process_that_cannot_map_its_uid_reports_the_hosts_class_but_builds_no_sandbox() -> None:
    """A uid-0 child started without CAP_SETFCAP (any floor below sealed) can create a user
    namespace but not map uid 0 into it: the host still offers sealed (containment_achieved),
    this process runs scoped, and a sealed floor here is refused, saying why."""
    from dataclasses import replace

    p = replace(probe(7, True, True), map_reason="writing its uid_map failed: Operation not permitted")
    assert (p.offered, p.offered_here) == ("sealed", "scoped")
    d = decide(p, "scoped", workdir_exec=False)
    assert (d.achieved, d.floor_met, d.enforceable) == ("scoped", True, "sealed")
    d = decide(p, "sealed", workdir_exec=False)
    assert not d.floor_met and d.achieved == "scoped" and d.enforceable == "sealed"
    assert d.shortfall_reason is not None and "cannot map its uid" in d.shortfall_reason
    assert decide(probe(7, True, True), "sealed", workdir_exec=False).floor_met

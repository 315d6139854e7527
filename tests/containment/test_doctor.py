"""``roostctl doctor`` reports the class this host offers, the facts behind it, and what would raise it."""

from __future__ import annotations

from pathlib import Path

from ops.support import roostctl

from roost.capsule.probe import probe_host


def test_doctor_shows_the_achievable_class(tmp_path: Path) -> None:
    probe = probe_host({})
    res = roostctl("doctor", "--json", state_dir=tmp_path)
    found = next(f for f in res.json["findings"] if f["check"] == "containment")
    assert f"up to '{probe.offered}'" in found["detail"]
    assert f"Landlock ABI {probe.landlock_abi or 'absent'}" in found["detail"]
    assert f"userns_grant {probe.userns_grant}" in found["detail"]
    assert found["status"] == ("ok" if probe.offered == "sealed" else "warn")
    assert bool(found["fix"]) == (probe.offered != "sealed")

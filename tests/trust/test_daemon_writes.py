"""The daemon's own writes into a caller's workdir follow no link."""

from __future__ import annotations

from pathlib import Path

from tests.support.daemon import RunningDaemon


async def test_planted_murmur_link_refuses_a_delegation(daemon: RunningDaemon, tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    wd.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _sid, cred = await daemon.register_top("orchestrator", workdir=str(wd))
    (wd / ".murmur").symlink_to(elsewhere)
    status, body, _, _ = await daemon.call(
        "POST", "/jobs", json={"name": "worker", "version": "0.1.0"}, headers={"x-murmur-spawn-credential": cred}
    )
    assert status == 409, body
    assert "symbolic link" in body["error"], body
    assert list(elsewhere.iterdir()) == []

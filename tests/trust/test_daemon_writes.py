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


async def test_planted_murmur_link_refuses_the_registration(daemon: RunningDaemon, tmp_path: Path) -> None:
    # An attacker plants `.murmur` as a link to /etc in its own workdir and registers: the
    # daemon (often root) would later write its records there, so the workdir is refused now.
    wd = tmp_path / "wd"
    wd.mkdir(mode=0o700)
    (wd / ".murmur").symlink_to("/etc")
    body = {"session_id": "ses_planted", "name": "orchestrator", "version": "0.1.0", "workdir": str(wd)}
    status, answer, _, _ = await daemon.call("POST", "/register", json=body)
    assert status == 403, answer
    assert answer == {
        "error": f"the workdir's {wd}/.murmur is a symbolic link, which could send roost's records "
        "elsewhere; remove it and let roost create the directory"
    }
    status, _, _, _ = await daemon.call("GET", "/status/ses_planted")
    assert status == 404


async def test_murmur_that_is_not_a_directory_refuses_a_launch(daemon: RunningDaemon, tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    wd.mkdir(mode=0o700)
    (wd / ".murmur").write_text("not a directory")
    status, answer, _, _ = await daemon.call(
        "POST", "/jobs", json={"name": "orchestrator", "version": "0.1.0", "workdir": str(wd)}
    )
    assert status == 403, answer
    assert answer == {"error": f"the workdir's {wd}/.murmur is not a directory"}


async def test_an_existing_murmur_directory_of_the_caller_is_accepted(daemon: RunningDaemon, tmp_path: Path) -> None:
    wd = tmp_path / "wd"
    (wd / ".murmur").mkdir(mode=0o700, parents=True)
    wd.chmod(0o700)
    await daemon.register_top("orchestrator", workdir=str(wd))

"""A local user (uid 65534) against the daemon (root): workdirs, reads through the peer plane,
the daemon's own writes, and forged handles. Tests run as root; the attacker is a child
process that dropped to uid 65534."""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from trust.attacker import NOBODY, owned_dir, request_as

from tests.support.peer import PeerEnv, Session

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="acting as another uid needs root")
SECRET = b"root's secret\n"


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A root-owned 0755 directory under /tmp (sticky), so uid 65534 can reach its own dirs in it."""
    d = Path(tempfile.mkdtemp(prefix="roost-trust-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    with contextlib.suppress(OSError):
        subprocess.run(["umount", "-l", str(d / "nobody" / "share" / "proc")], capture_output=True, check=False)
    shutil.rmtree(d, ignore_errors=True)


def _mount(args: list[str]) -> bool:
    return subprocess.run(["mount", *args], capture_output=True, check=False).returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def _root_secret(scratch: Path) -> Path:
    vault = scratch / "vault"
    vault.mkdir(mode=0o700)
    secret = vault / "secret.txt"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    return secret


async def _register_as_nobody(
    env: PeerEnv, workdir: Path, name: str = "alpha"
) -> tuple[int, dict[str, object], Session]:
    sid = f"ses_{os.urandom(8).hex()}"
    url = await env.door(name, sid)
    status, body = await request_as(
        NOBODY,
        env.daemon.url,
        "POST",
        "/register",
        {"session_id": sid, "name": name, "version": "0.1.0", "workdir": str(workdir), "capsule_url": url},
    )
    cred = body.get("credential", "") if isinstance(body, dict) else ""
    return status, body, Session(sid, str(cred), workdir, url, name)


async def test_cannot_register_in_a_root_or_other_users_workdir(peer_env: PeerEnv, scratch: Path) -> None:
    root_dir = scratch / "rootwd"
    root_dir.mkdir(mode=0o700)
    status, body, _ = await _register_as_nobody(peer_env, root_dir)
    assert status == 403, body
    assert body == {"error": f"the workdir {root_dir} belongs to uid 0, not to the calling uid {NOBODY}"}
    other = owned_dir(scratch, "other", 1234)
    status, body, _ = await _register_as_nobody(peer_env, other)
    assert status == 403 and "belongs to uid 1234" in body["error"], body
    # Its own directory under a directory another user owns: that user could swap it.
    theirs = owned_dir(scratch, "theirs", 1234, 0o755)
    mine = owned_dir(theirs, "mine", NOBODY)
    status, body, _ = await _register_as_nobody(peer_env, mine)
    assert status == 403, body
    assert body["error"].startswith(f"the workdir path component {theirs} belongs to uid 1234"), body
    # Its own directory under a world-writable, non-sticky directory: refused too.
    loose = scratch / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    mine2 = owned_dir(loose, "mine", NOBODY)
    status, body, _ = await _register_as_nobody(peer_env, mine2)
    assert status == 403 and f"{loose} is writable by group or others and not sticky" in body["error"], body
    # A link as a component is refused.
    own = owned_dir(scratch, "own", NOBODY)
    (scratch / "link").symlink_to(own)
    status, body, _ = await _register_as_nobody(peer_env, scratch / "link")
    assert status == 403 and "symbolic link" in body["error"], body
    # Its own 0700 directory under /tmp (sticky): accepted, and the session records its uid.
    status, body, s = await _register_as_nobody(peer_env, own)
    assert status == 200, body
    rec = peer_env.daemon.roost.table.get(s.sid)
    assert rec is not None and rec.uid == NOBODY and rec.workdir == str(own)


async def test_cannot_get_a_byte_it_could_not_read(peer_env: PeerEnv, scratch: Path) -> None:
    secret = _root_secret(scratch)
    wd = owned_dir(scratch, "nobody", NOBODY)
    share = owned_dir(wd, "share", NOBODY)
    status, body, a = await _register_as_nobody(peer_env, wd)
    assert status == 200, body
    b = await peer_env.session("beta")
    (share / "mine.txt").write_bytes(b"mine\n")
    os.chown(share / "mine.txt", NOBODY, NOBODY)
    status, minted = await peer_env.mint(a, "mine.txt", b)
    assert status == 200, minted
    status, _, _, raw = await peer_env.redeem(minted["handle"], b.audience)
    assert status == 200 and raw == b"mine\n"

    os.link(secret, share / "hardlink.txt")  # root can link anything; the attacker names it
    planted = share / "planted.txt"
    planted.write_bytes(SECRET)
    planted.chmod(0o600)
    (share / "symlink.txt").symlink_to(secret)
    for name in ("hardlink.txt", "planted.txt", "symlink.txt"):
        status, out = await peer_env.mint(a, name, b)
        assert status != 200, (name, out)
        assert SECRET.decode() not in json.dumps(out)
    # Minted while readable, then swapped for root's file: the redeem checks the descriptor.
    (share / "swap.txt").write_bytes(b"ok\n")
    os.chown(share / "swap.txt", NOBODY, NOBODY)
    status, minted = await peer_env.mint(a, "swap.txt", b)
    assert status == 200, minted
    os.replace(share / "hardlink.txt", share / "swap.txt")
    status, out, _, raw = await peer_env.redeem(minted["handle"], b.audience)
    assert status != 200 and SECRET not in raw, out
    assert out == {"error": "io_error", "message": "read failed: permission denied"}
    # A bind mount of /proc inside its export root (made by someone with the power to).
    proc = share / "proc"
    proc.mkdir()
    if not _mount(["--bind", "/proc", str(proc)]):
        pytest.skip("cannot bind-mount /proc here")
    try:
        status, out = await peer_env.mint(a, "proc/1/environ", b)
        assert status != 200, out
    finally:
        _umount(proc)


async def test_planted_murmur_link_gets_nothing_written(peer_env: PeerEnv, scratch: Path) -> None:
    wd = owned_dir(scratch, "nobody", NOBODY)
    owned_dir(wd, "share", NOBODY)
    target = scratch / "elsewhere"
    target.mkdir()
    status, body, a = await _register_as_nobody(peer_env, wd)
    assert status == 200, body
    (wd / ".murmur").symlink_to(target)
    b = await peer_env.session("beta")
    # A mint refusal is traced into the session's records: with .murmur a link, nothing is.
    status, out = await peer_env.mint(a, "nope.txt", b)
    assert status == 404, out
    assert list(target.iterdir()) == []
    assert (wd / ".murmur").is_symlink()


class OpenWatch:
    """Counts the kernel's IN_OPEN events on one file (inotify through libc), so a test can
    observe whether the daemon opened it at all."""

    IN_OPEN = 0x20
    IN_NONBLOCK = os.O_NONBLOCK

    def __init__(self, path: Path) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(self.IN_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), self.IN_OPEN)
        assert wd >= 0, os.strerror(ctypes.get_errno())

    def opens(self) -> int:
        count = 0
        while True:
            try:
                buf = os.read(self.fd, 4096)
            except BlockingIOError:
                return count
            offset = 0
            while offset < len(buf):
                _wd, mask, _cookie, length = struct.unpack_from("iIII", buf, offset)
                count += bool(mask & self.IN_OPEN)
                offset += 16 + length

    def close(self) -> None:
        os.close(self.fd)


async def test_forged_handles_cost_nothing(peer_env: PeerEnv) -> None:
    """A forged handle opens no file; its refusal is traced in the session it names with
    ``path: null`` (seed 000: "`null` until the MAC has verified — a payload that failed it is
    caller-controlled and is not recorded as fact")."""
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    exported = a.workdir / "share" / "f.txt"
    exported.write_bytes(b"x")
    trace = a.workdir / ".murmur" / a.sid / "trace.jsonl"
    before = trace.read_bytes() if trace.exists() else b""
    payload = {"v": 1, "iss": a.sid, "p": "f.txt", "exp": 2**62, "n": "00" * 16}
    seg = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
    forged = f"mh1.{seg}.{'A' * 43}"
    watch = OpenWatch(exported)
    try:
        for audience in (b.audience, "x" * 8000, None):
            status, out, _, _ = await peer_env.redeem(forged, audience)
            assert status in (400, 401, 403), out
        after = trace.read_bytes() if trace.exists() else b""
        lines = [json.loads(x) for x in after[len(before) :].splitlines()]
        assert [ln["event_type"] for ln in lines] == ["peer_handle_redeem"] * 3
        assert all(ln["path"] is None and ln["bytes"] is None and ln["sha256"] is None for ln in lines)
        assert [ln["outcome"] for ln in lines] == ["handle_not_valid", "missing_audience", "missing_audience"]
        assert [ln["audience_asserted"] for ln in lines] == [b.audience, None, None]
        assert b"AAAAAAAAAAAA" not in after  # the forged token itself is never recorded
        # No file was opened for a token whose MAC did not verify ...
        assert watch.opens() == 0
        # ... while a genuine handle for the same file does open it (the watch can see opens).
        status, minted = await peer_env.mint(a, "f.txt", b)
        assert status == 200, minted
        watch.opens()  # minting checks the file; only the redeem's opens count below
        status, _, _, data = await peer_env.redeem(minted["handle"], b.audience)
        assert status == 200 and data == b"x"
        assert watch.opens() >= 1
    finally:
        watch.close()

"""The peer plane's symlink rule follows the class each session's host achieved (told at register).

Under ``scoped`` any link is ``symlink_refused``; under ``advisory`` and ``sealed`` a link that
stays inside the export root is served (the handle names the target), one that leaves it is
``outside_root``. A session registered without a class keeps the strict rule.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.peer import SECRET, PeerEnv, Session, peer_env, peer_registry

__all__ = ["peer_env", "peer_registry"]


async def _session(env: PeerEnv, name: str, containment: str | None) -> Session:
    sid = f"ses_{os.urandom(8).hex()}"
    wd = env.root / sid
    (wd / "share").mkdir(parents=True)
    url = await env.door(name, sid)
    extra: dict[str, Any] = {"workdir": str(wd), "capsule_url": url}
    if containment is not None:
        extra["containment"] = containment
    _, cred = await env.daemon.register_top(name, session_id=sid, **extra)
    return Session(sid, cred, wd, url, name)


def _plant(wd: Path) -> None:
    share = wd / "share"
    (share / "real.txt").write_bytes(b"inside")
    (wd / "secret.txt").write_bytes(SECRET)
    (share / "link_in").symlink_to("real.txt")
    (share / "link_out").symlink_to("../secret.txt")


@pytest.mark.parametrize(
    ("containment", "link_in", "link_out"),
    [
        ("scoped", "symlink_refused", "symlink_refused"),
        (None, "symlink_refused", "symlink_refused"),
        ("advisory", "ok", "outside_root"),
        ("sealed", "ok", "outside_root"),
    ],
)
async def test_symlink_rule_keyed_by_achieved_class(
    peer_env: PeerEnv, containment: str | None, link_in: str, link_out: str
) -> None:
    a = await _session(peer_env, "alpha", containment)
    b = await _session(peer_env, "beta", None)
    assert peer_env.daemon.roost.table.get(a.sid).containment == containment
    _plant(a.workdir)
    status, body = await peer_env.mint(a, "link_in", b)
    if link_in == "ok":
        assert status == 200, body
        got, _obj, _resp, raw = await peer_env.redeem(body["handle"], b.audience)
        assert (got, raw) == (200, b"inside")
    else:
        assert (status, body["error"]) == (403, link_in)
    status, body = await peer_env.mint(a, "link_out", b)
    assert (status, body["error"]) == (403, link_out)
    assert SECRET not in repr(body).encode()


async def test_register_refuses_an_unknown_class(peer_env: PeerEnv) -> None:
    status, body, _, _ = await peer_env.daemon.call(
        "POST", "/register", json={"session_id": "ses_x1", "name": "alpha", "version": "0.1.0", "containment": "max"}
    )
    assert status == 400 and "containment must be one of" in body["error"]

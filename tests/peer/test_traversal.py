"""A traversal corpus (> 200 paths) against mint *and* redeem: zero bytes from outside the root.

A secret file is planted next to the export root, above the workdir, and behind links inside
the root; every path of the corpus is minted, every handle that mints is redeemed, and handles
carrying the raw corpus path as ``p`` are minted directly with the session's key (as if an
attacker held it) and redeemed, so the redeem-side rules are exercised on their own. No
response body may contain the secret; every 200 must serve one of the files that really sit
under the root.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path

from roost.core import tokens
from tests.support.peer import SECRET, PeerEnv

INSIDE = {"ok.txt": b"inside-ok", "sub/inner.txt": b"inside-inner", "100%41.txt": b"inside-pct"}


def plant(workdir: Path, outside: Path) -> None:
    share = workdir / "share"
    for rel, data in INSIDE.items():
        (share / rel).parent.mkdir(parents=True, exist_ok=True)
        (share / rel).write_bytes(data)
    (workdir / "secret.txt").write_bytes(SECRET)
    (workdir.parent / "secret.txt").write_bytes(SECRET)
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "inner.txt").write_bytes(SECRET)
    (share / "link_out").symlink_to("../secret.txt")
    (share / "link_abs").symlink_to(outside / "secret.txt")
    (share / "link_in").symlink_to("ok.txt")
    (share / "dirlink").symlink_to("..")
    (share / "dirlink_abs").symlink_to(outside)
    (share / "sub" / "deeplink").symlink_to("../../secret.txt")
    (share / "loop").symlink_to("loop")
    os.mkfifo(share / "fifo")
    (share / "emptydir").mkdir()


def corpus(outside: Path) -> list[str]:
    ups = ["..", "%2e%2e", "%2E%2E", ".%2e", "%2e.", "%252e%252e", "%25252e%25252e", "..%00", "...", ". ."]
    seps = ["/", "%2f", "%2F", "%252f", "\\", "//", "/./"]
    targets = ["secret.txt", "share/../secret.txt", "etc/passwd"]
    out: list[str] = []
    for up, sep, target in itertools.product(ups, seps, targets):
        out.append(f"{up}{sep}{target}")
    for n in (2, 3, 8):
        out.append("/".join([".."] * n) + "/secret.txt")
        out.append("%2e%2e%2f" * n + "secret.txt")
        out.append("sub/" + "../" * n + "secret.txt")
    out += [
        "/etc/passwd",
        str(outside / "secret.txt"),
        "//etc/passwd",
        "%2fetc%2fpasswd",
        "%252fetc%252fpasswd",
        "\x00",
        "ok.txt\x00",
        "ok.txt%00.png",
        "%00",
        "link_out",
        "link_abs",
        "link_in",
        "dirlink/secret.txt",
        "dirlink/share/ok.txt",
        "dirlink_abs/secret.txt",
        "dirlink_abs/inner.txt",
        "sub/deeplink",
        "loop",
        "loop/x",
        "fifo",
        "emptydir",
        "sub",
        ".",
        "./ok.txt",
        "ok.txt/.",
        "sub/./inner.txt",
        "sub//inner.txt",
        "",
        "/",
        "x" * 255,
        "x" * 256,
        "x/" * 2000 + "y",
        ("a" * 250 + "/") * 20 + "secret.txt",
        "\udcff",
        "%ff%fe",
        "caf%e9",
        "ok.txt%2f..%2f..%2fsecret.txt",
        "sub%2finner.txt",
        "sub%2f..%2f..%2fsecret.txt",
        "ok.txt/",
        "ok.txt//",
        "ok.txt/..",
        "%2e",
        "%2e%2e",
        "secret.txt",
        "../share/ok.txt",
        "100%2541.txt",
        "100%41.txt",
        "%",
        "%%2e%2e",
        "\n../secret.txt",
        " ../secret.txt",
        "ok.txt\n",
    ]
    return out


def allowed_bodies() -> set[bytes]:
    return set(INSIDE.values())


async def test_traversal_corpus_serves_nothing_outside(peer_env: PeerEnv, tmp_path: Path) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    outside = tmp_path / "outside"
    plant(a.workdir, outside)
    paths = corpus(outside)
    assert len(paths) >= 200, len(paths)
    daemon = peer_env.daemon
    key = daemon.keys.handle_key(a.sid, daemon.roost.table.sessions[a.sid].handle_salt)
    minted = served = 0
    for path in paths:
        status, body = await peer_env.mint(a, path, b)
        assert b"TOP-SECRET" not in repr(body).encode()
        handles = []
        if status == 200:
            minted += 1
            handles.append(body["handle"])
        else:
            assert status in (400, 403, 404, 500), (path, status, body)
            assert body["error"] in (
                "outside_root",
                "symlink_refused",
                "not_found",
                "not_a_regular_file",
                "invalid_request",
            ), (path, body)
        with contextlib.suppress(UnicodeEncodeError):
            handles.append(
                tokens.mint_handle(key, iss=a.sid, path=path, exp_ms=daemon.roost.clock() + 10_000, audience=b.audience)
            )
        for h in handles:
            status, obj, _resp, raw = await peer_env.redeem(h, b.audience)
            assert SECRET not in raw, path
            if status == 200:
                served += 1
                assert raw in allowed_bodies(), path
            else:
                assert obj["error"] in ("outside_root", "symlink_refused", "not_found", "not_a_regular_file"), (
                    path,
                    obj,
                )
    assert minted >= 3 and served >= minted


async def test_link_swapped_in_after_minting(peer_env: PeerEnv, tmp_path: Path) -> None:
    a = await peer_env.session("alpha")
    b = await peer_env.session("beta")
    outside = tmp_path / "outside"
    plant(a.workdir, outside)
    share = a.workdir / "share"
    _, h_file = await peer_env.mint(a, "ok.txt", b)
    _, h_deep = await peer_env.mint(a, "sub/inner.txt", b)
    # final component becomes a link to the secret
    (share / "ok.txt").unlink()
    (share / "ok.txt").symlink_to(outside / "secret.txt")
    # intermediate directory becomes a link to a directory holding a same-named secret
    (share / "sub").rename(share / "sub.old")
    (share / "sub").symlink_to(outside)
    for h in (h_file["handle"], h_deep["handle"]):
        status, obj, _, raw = await peer_env.redeem(h, b.audience)
        assert (status, obj["error"]) == (403, "symlink_refused")
        assert SECRET not in raw
    # the export root itself replaced by a link
    share.rename(a.workdir / "share.old")
    (a.workdir / "share").symlink_to(outside)
    status, obj, _, raw = await peer_env.redeem(h_deep["handle"], b.audience)
    assert (status, obj["error"]) == (403, "symlink_refused") and SECRET not in raw

"""``GET /records/{id}`` on the admin socket: a session's record files read beneath its directory.

A session no job of this daemon started (registered by hand) has its workdir on this host: the
route reads it there, from offsets, lists regular files only, follows no link, and refuses a
name that is not a relative path below the directory. (A child on another node is read through
its keeper: tests/cluster/test_ray_dashboard.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ops.support import admin_http

from roost.core.wire import RECORD_START_HEADER
from tests.support.daemon import RunningDaemon


async def _get(d: RunningDaemon, path: str) -> tuple[int, bytes, str | None]:
    async with admin_http(d.config.admin_socket_path) as http, http.get("http://admin" + path) as resp:
        return resp.status, await resp.read(), resp.headers.get(RECORD_START_HEADER)


@pytest.fixture
async def session(daemon: RunningDaemon, tmp_path: Path) -> tuple[str, Path]:
    wd = tmp_path / "wd"
    (wd / "out").mkdir(parents=True)
    sid, _ = await daemon.register_top("orchestrator", workdir=str(wd))
    return sid, wd


async def test_reads_a_file_from_offsets_and_its_tail(daemon: RunningDaemon, session: tuple[str, Path]) -> None:
    sid, wd = session
    (wd / "out" / "result.txt").write_bytes(b"0123456789")
    assert await _get(daemon, f"/records/{sid}?name=out/result.txt") == (200, b"0123456789", "0")
    assert await _get(daemon, f"/records/{sid}?name=out/result.txt&offset=4&max_bytes=3") == (200, b"456", "4")
    assert await _get(daemon, f"/records/{sid}?name=out/result.txt&offset=-1&max_bytes=4") == (200, b"6789", "6")
    # Past the end (the file was replaced by a shorter one): the read starts over.
    assert await _get(daemon, f"/records/{sid}?name=out/result.txt&offset=99&max_bytes=2") == (200, b"01", "0")
    assert await _get(daemon, f"/records/{sid}?name=out/missing.txt") == (200, b"", "0")


async def test_lists_regular_files_and_follows_no_link(
    daemon: RunningDaemon, session: tuple[str, Path], tmp_path: Path
) -> None:
    sid, wd = session
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the operator's page\n")
    (wd / "out" / "result.txt").write_text("done\n")
    (wd / "out" / "peek.txt").symlink_to(secret)
    (wd / "out" / "sub").mkdir()
    (wd / "lnk").symlink_to(wd / "out")
    status, body, _ = await _get(daemon, f"/records/{sid}?dir=out")
    assert (status, body) == (200, b'{"files": ["result.txt"]}')
    assert await _get(daemon, f"/records/{sid}?name=out/peek.txt") == (200, b"", "0")
    assert await _get(daemon, f"/records/{sid}?name=lnk/result.txt") == (200, b"", "0")
    assert (await _get(daemon, f"/records/{sid}?dir=lnk"))[:2] == (200, b'{"files": []}')


@pytest.mark.parametrize(
    "query",
    [
        "name=../secret.txt",
        "name=/etc/passwd",
        "name=out/./result.txt",
        "name=out//result.txt",
        "dir=..",
        "name=out/result.txt&dir=out",
        "",
        "name=out/result.txt&offset=x",
        "name=out/result.txt&max_bytes=-1",
        "name=out/result.txt&max_bytes=999999999",
    ],
)
async def test_refuses_what_is_not_a_relative_name_or_a_count(
    daemon: RunningDaemon, session: tuple[str, Path], query: str
) -> None:
    sid, _ = session
    status, body, _ = await _get(daemon, f"/records/{sid}?{query}")
    assert status == 400 and b"Traceback" not in body, (status, body)


async def test_an_unknown_id_is_not_found(daemon: RunningDaemon, session: tuple[str, Path]) -> None:
    status, _, _ = await _get(daemon, f"/records/ses_{'0' * 16}?dir=out")
    assert status == 404

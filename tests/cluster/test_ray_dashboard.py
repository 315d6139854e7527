"""The dashboard's job and session pages show a remote child's input, ``out/`` files and trace.

A real ``worker`` example capsule runs under the real ``roost-capsule`` host on worker node w2,
whose root the daemon is never told about (tests/cluster/conftest.py). The dashboard runs in this
process against the real daemon's admin socket and is fetched over real loopback HTTP, through its
guard (token, cookie, Host). While the pages are fetched, the audit hook of
tests/support/nodewatch.py watches this process — daemon and dashboard alike: neither may open a
file under the nodes' roots, so what the pages show came through w2's keeper. What they show is
then compared with what the node holds (read by the test itself, after the watch).
"""

from __future__ import annotations

import html
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from roost.dashboard.admin import AdminSocket
from roost.dashboard.guard import Guard
from roost.dashboard.server import build_app
from roost.observe.tracelines import trace_path
from tests.support.cluster import job_final, ray_settings
from tests.support.daemon import RunningDaemon
from tests.support.nodewatch import daemon_stays_off
from tests.support.registry import EXAMPLES

# Above the test's worst-case waits, plus the session cluster's start for the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

PLACEMENT = {"worker": {"resources": {"w2": 1}}}
TASK = "red <b>green</b> blue"


@pytest.fixture
async def worker_daemon(ray_ns: str, daemon_factory: Any, ray_cluster: Any, tmp_path: Path) -> RunningDaemon:
    settings = ray_settings(ray_cluster, tmp_path, ray_ns, ray_placement=PLACEMENT)
    del settings["runtime_command"]
    settings.update(spawn_allow=("worker",), launch_timeout_secs=60.0)
    d: RunningDaemon = await daemon_factory(EXAMPLES / "registry", **settings)
    return d


class Dashboard:
    """A dashboard served from this process on a loopback port, with the cookie its token buys."""

    def __init__(self, port: int, http: aiohttp.ClientSession, cookie: str) -> None:
        self.port, self.http, self.cookie = port, http, cookie

    async def page(self, path: str) -> str:
        async with self.http.get(f"http://127.0.0.1:{self.port}{path}", headers={"Cookie": self.cookie}) as resp:
            body = await resp.text()
            assert resp.status == 200, (path, resp.status, body)
            return body


@pytest.fixture
async def dashboard(worker_daemon: RunningDaemon) -> AsyncIterator[Dashboard]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    guard = Guard(port=sock.getsockname()[1])
    runner = web.AppRunner(build_app(guard, AdminSocket(worker_daemon.config.admin_socket_path)))
    await runner.setup()
    await web.SockSite(runner, sock).start()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(guard.url(), allow_redirects=False) as resp:
                assert resp.status == 303, await resp.text()
                cookie = resp.headers["Set-Cookie"].split(";", 1)[0]
            yield Dashboard(guard.port, http, cookie)
    finally:
        await runner.cleanup()


async def test_a_remote_childs_pages_show_its_input_out_files_and_trace_read_on_its_node(
    worker_daemon: RunningDaemon, dashboard: Dashboard, ray_cluster: Any, tmp_path: Path
) -> None:
    d = worker_daemon
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "worker", "version": "0.1.0", "task": TASK})
    assert status == 201, job
    final = await job_final(d, job["job_id"], timeout=90)
    assert final["state"] == "complete", final
    workdir, sid = Path(job["workdir"]), job["session_id"]
    assert workdir.is_relative_to(ray_cluster.roots["w2"]), workdir
    # A child that plants a link in out/ shows nothing through it (read beneath its directory).
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the page\n")
    (workdir / "out" / "peek.txt").symlink_to(secret)

    with daemon_stays_off(ray_cluster.base) as opened:
        pages = {
            "job": await dashboard.page(f"/job/{job['job_id']}"),
            "session": await dashboard.page(f"/session/{sid}"),
            "fragment": await dashboard.page(f"/fragment/session/{sid}"),
        }
    assert opened == [], f"the daemon or the dashboard opened files on a node's root itself: {opened[:5]}"

    # What the node holds (read by the test itself, after the watch).
    result = (workdir / "out" / "result.txt").read_text()
    assert "reversed: blue <b>green</b> red" in result, result
    held = [json.loads(line) for line in trace_path(str(workdir), sid).read_text().splitlines()]
    kinds = {line["event_type"] for line in held}
    assert {"session_start", "task_start", "task_end", "session_end"} <= kinds, kinds
    task_status = next(line["exit_status"] for line in held if line["event_type"] == "task_end")
    for name, page in pages.items():
        # The input and the result file, escaped: no markup from the child reaches the page.
        assert f"<pre>{html.escape(TASK, quote=True)}</pre>" in page, name
        assert "<code>out/result.txt</code>" in page and html.escape(result, quote=True) in page, name
        assert "<b>green</b>" not in page, name
        assert "peek.txt" not in page and "not for the page" not in page, name
        # The trace: its session points and the task's bar, drawn from the node's trace.jsonl.
        assert '<li class="row" data-lane="task">' in page and f"task {task_status}, " in page, name
        assert "session_start" in page and "session_end" in page, name
        assert "No trace lines yet." not in page, name

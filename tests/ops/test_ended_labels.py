"""``roostctl tree``/``sessions`` and the dashboard say why a session ended: an operator's cancel
reads as such, not as ``(session failed)`` (a real daemon, a real child, the admin socket)."""

from __future__ import annotations

from typing import Any

from roost.ctl.commands.tree import ended_why
from roost.dashboard.render import tree as render_tree
from tests.ops.support import admin_http
from tests.support.launcher import RUNTIME, add_doubles, wait_for
from tests.support.registry import RegistryBuilder


async def test_an_operator_cancel_is_labelled_as_one(daemon_factory: Any, registry: RegistryBuilder) -> None:
    add_doubles(registry)
    d = await daemon_factory(registry.root, spawn_allow=("solo",), runtime_command=RUNTIME, stop_grace_secs=1.0)
    async with admin_http(d.config.admin_socket_path) as http:
        body = {"name": "solo", "version": "0.1.0", "task": "sleep 60"}
        async with http.post("http://admin/jobs", json=body) as r:
            job = await r.json()
            assert r.status == 201, job
        async with http.post(f"http://admin/jobs/{job['job_id']}/cancel") as r:
            assert r.status == 200
        await wait_for(lambda: d.roost.launcher.jobs[job["job_id"]].final)
        await wait_for(lambda: not d.roost.table.get(job["session_id"]).running)  # type: ignore[union-attr]
        async with http.get("http://admin/tree?state=all") as r:
            (node,) = (await r.json())["roots"]
        async with http.get("http://admin/sessions?state=all") as r:
            (session,) = (await r.json())["sessions"]
    assert node["job_state"] == "terminated" and node["status"] == "failed"
    assert ended_why(node) == "an operator cancelled this job"
    assert session["end_reason"] == "an operator cancelled this job"
    html = render_tree([node], "none")
    assert "an operator cancelled this job" in html and "session failed" not in html

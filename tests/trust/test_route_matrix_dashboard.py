"""``roostctl dashboard``'s routes × caller classes, against a running dashboard and daemon.

Every route of the dashboard's application, enumerated from it, is driven as: its owner's
browser (the run's cookie, our ``Origin`` and the CSRF value on an action), its owner's uid
without the token, uid 65534 (a forked client), a cross-site page and a page whose DNS name was
rebound to 127.0.0.1. Each answer is compared with the authorization table's (tests/trust/matrix.py);
a process inside a contained capsule is tests/trust/test_route_matrix_capsule.py. The last
cells act: the owner cancels a job, then drains the daemon.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from launcher.test_launch import start
from trust.attacker import NOBODY, request_as

from roost.core.authz import Listener
from roost.dashboard.guard import COOKIE, CSRF_HEADER, Guard
from roost.http.authz import route_keys
from tests.support.launcher import wait_for
from tests.support.registry import RegistryBuilder
from tests.trust.edgecells import DASHBOARD_ENDS, dashboard_expect, dashboard_sample, serve_dashboard
from tests.trust.matrix import BROWSER_POST, EVIL_HOST, EVIL_ORIGIN, Ledger, Sample, send

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="forking a client as uid 65534 needs root")

CLASSES = ("rebound", "cross_site", "other_uid", "root", "own")


async def test_dashboard_route_by_caller_class(daemon_factory: Any, registry: RegistryBuilder) -> None:
    d = await start(daemon_factory, registry)
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0", "task": "sleep 60"})
    assert status == 201, job
    running = d.roost.launcher.jobs[job["job_id"]]
    await wait_for(lambda: running.session_id is not None, 20)
    assert d.roost.admin.path is not None and running.session_id is not None
    async with serve_dashboard(d.roost.admin.path) as (url, guard, app):
        cookie = await _cookie(url, guard)
        keys = route_keys(app)
        ledger = Ledger(Listener.DASHBOARD, keys)
        order = sorted((k for k in keys if k not in DASHBOARD_ENDS), key=str) + list(DASHBOARD_ENDS)
        for key in order:
            sample = dashboard_sample(key, job["job_id"], running.session_id)
            for caller in CLASSES:
                got = await _drive(url, guard, cookie, sample, caller)
                ledger.check(key, caller, got, dashboard_expect(key, cookie=caller == "own"))
        ledger.finish(CLASSES)
    assert running.final and running.state == "terminated"  # the owner's cancel
    assert d.roost.referee.draining  # and its drain


async def _cookie(url: str, guard: Guard) -> str:
    """The owner's browser trades the printed URL's token for the run's cookie."""
    status, _ = await send(url, Sample("GET", f"/?token={guard.token}"))
    assert status == 303
    return f"{COOKIE}={guard.session}"


async def _drive(url: str, guard: Guard, cookie: str, sample: Sample, caller: str) -> tuple[int, Any]:
    if caller == "other_uid":
        return await request_as(NOBODY, url, sample.method, sample.path, sample.body)
    if caller == "rebound":
        return await send(url, sample, {"Host": EVIL_HOST})
    if caller == "cross_site":  # SameSite=Strict: the browser sends no cookie across sites
        if sample.method == "POST":
            headers = {"Origin": EVIL_ORIGIN, "Content-Type": BROWSER_POST, CSRF_HEADER: guard.csrf}
            return await send(url, sample, headers, data=json.dumps(sample.body))
        return await send(url, sample, {"Origin": EVIL_ORIGIN})
    if caller == "own":
        headers = {"Cookie": cookie}
        if sample.method == "POST":
            headers |= {"Origin": url, CSRF_HEADER: guard.csrf}
        return await send(url, sample, headers)
    return await send(url, sample)

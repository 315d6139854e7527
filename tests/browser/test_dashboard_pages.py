"""The dashboard's operator views in a real headless Chromium: history charts drawn from the
daemon's own samples, the delegation tree's timeline growing while a job runs, the jobs page's
filters, end times and paging, parent ↔ children links, the events page, trace links, the exit
status an entrypoint reported, a favicon, and no server error when the browser leaves pages
mid-stream. The daemon and dashboard are test_dashboard.py's (module ``env``); a drain pushed
live and a daemon that stops use a daemon of their own (``lone``), since they end it. Screenshots
go to ``test-artifacts/``.
"""

from __future__ import annotations

import http.client
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser.test_dashboard import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, TRACE_UI, Env, _cookie, _playwright, env
from ops.support import daemon_env, roostctl, wait_for

from roost.dashboard.pages import PAGE, JobFilter, filter_jobs

pytestmark = pytest.mark.slow
__all__ = ["env"]  # the module fixture, shared


@pytest.fixture
def browser() -> Iterator[Any]:
    sync_api = _playwright()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:  # type: ignore[attr-defined]
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _open(browser: Any, env: Env) -> Any:
    page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
    page.goto(env.url)
    page.wait_for_selector("#conn[data-state=live]", timeout=15_000)
    return page


def test_charts_draw_the_daemons_own_history(env: Env, browser: Any) -> None:
    page = _open(browser, env)
    # The daemon samples every 5 s from its start: wait for two, then for a spawn decision (the
    # orchestrator delegating to worker) to show as a rate.
    env.ctl("spawn", "orchestrator@0.1.0", "--task", "a b", "--wait")
    page.wait_for_function(
        "() => Number(document.querySelector('.chart[data-chart=live]').dataset.points) >= 2", timeout=30_000
    )
    # A rate is drawn from two of its points, so three samples: wait until the spawns chart has them.
    page.wait_for_function(
        "() => { const c = document.querySelector('.chart[data-chart=spawns]');"
        " return Number(c.dataset.points) >= 2 && /now [0-9.]+ \\/min, peak [1-9]/.test(c.textContent); }",
        timeout=30_000,
    )
    for name in ("live", "starting", "lag_ms", "spawns", "refusals"):
        chart = page.locator(f".chart[data-chart={name}]")
        assert chart.locator("svg polyline").count() == 1, name
        box = chart.locator("svg").bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 20
    points = page.locator(".chart[data-chart=spawns] svg polyline").get_attribute("points") or ""
    ys = [float(p.split(",")[1]) for p in points.split()]
    assert min(ys) < max(ys)  # a line that moves: the spawn shows as a rise
    label = page.locator(".chart[data-chart=spawns] svg").get_attribute("aria-label") or ""
    assert label.startswith("spawn decisions over the last") and "peak" in label
    page.screenshot(path=str(ARTIFACTS / "dashboard-charts.png"), full_page=True)


def test_tree_timeline_grows_while_the_worker_runs_and_links_both_ways(env: Env, browser: Any) -> None:
    page = _open(browser, env)
    job = env.ctl("spawn", "orchestrator@0.1.0", "--task", "three words here", "--json").json  # type: ignore[attr-defined]
    page.goto(f"http://127.0.0.1:{env.port}/job/{job['job_id']}")
    page.wait_for_selector(".tree-timeline .tl-bar[data-growing=yes]", timeout=20_000)
    bars = page.locator(".tree-timeline .row")
    page.wait_for_function("() => document.querySelectorAll('.tree-timeline .row').length === 2", timeout=20_000)
    assert "orchestrator@0.1.0" in bars.nth(0).inner_text() and "worker@0.1.0" in bars.nth(1).inner_text()
    width = "() => document.querySelectorAll('.tree-timeline .tl-bar')[0].getBoundingClientRect().width"
    span = "() => document.querySelector('.tree-timeline .tl-span').textContent"
    before, label = page.evaluate(width), page.evaluate(span)
    page.wait_for_timeout(1500)
    assert page.evaluate(span) != label  # the axis runs to now while a job runs
    assert page.evaluate(width) >= before
    # The job's own trace timeline grows to now too, while its task runs.
    page.wait_for_selector("figure.timeline:not(.tree-timeline)[data-live] .tl-bar[data-growing=yes]", timeout=10_000)
    page.screenshot(path=str(ARTIFACTS / "dashboard-tree-timeline.png"), full_page=True)
    # parent → children: the orchestrator's page links its delegation; the child links back.
    child = page.locator("dl.pairs dd a[href^='/session/']").first
    child.wait_for(timeout=10_000)
    assert "worker@0.1.0" in child.inner_text()
    child.click()
    page.wait_for_selector("#h-summary", timeout=10_000)
    parent = page.locator("dl.pairs dd a[href='/session/" + job["session_id"] + "']")
    assert parent.count() == 1
    # The whole tree ends: no bar grows any more.
    wait_for(lambda: env.ctl("job", job["job_id"], "--json").json["state"] == "complete", timeout=60)  # type: ignore[attr-defined]
    page.goto(f"http://127.0.0.1:{env.port}/job/{job['job_id']}")
    page.wait_for_selector(".tree-timeline .tl-bar[data-growing=no]")
    assert page.locator(".tree-timeline .tl-bar[data-growing=yes]").count() == 0
    # The trace link names the job's trace in the operator's trace UI.
    href = page.locator("a.trace").get_attribute("href")
    assert href == f"{TRACE_UI}/traces/{job['trace_id']}" and re.fullmatch(r"[0-9a-f]{32}", job["trace_id"])


def test_jobs_page_filters_pages_and_end_times(env: Env, browser: Any) -> None:
    crash = env.ctl("spawn", "crasher@0.1.0", "--task", "boom", "--wait", "--json")  # type: ignore[attr-defined]
    crashed = crash.json
    page = _open(browser, env)
    page.goto(f"http://127.0.0.1:{env.port}/jobs")
    rows = page.locator("table.jobs tbody tr")
    rows.first.wait_for(timeout=10_000)
    assert rows.count() >= 3
    page.select_option("#f-state", crashed["state"])
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r".*/jobs\?state=.*"))
    assert rows.count() >= 1 and all(
        s == crashed["state"] for s in rows.evaluate_all("r => r.map(x => x.dataset.state)")
    )
    page.goto(f"http://127.0.0.1:{env.port}/jobs?capsule=crasher&q={crashed['job_id'][:12]}&uid={crashed['uid']}")
    assert rows.count() == 1 and rows.first.get_attribute("data-job") == crashed["job_id"]
    ended = rows.first.locator("td").nth(5).locator("time")
    assert ended.get_attribute("data-ms") == str(crashed["ended_ms"])  # end times, in the browser's zone
    page.goto(f"http://127.0.0.1:{env.port}/jobs?capsule=no-such-capsule")
    assert "No job matches" in page.inner_text("main")
    page.goto(f"http://127.0.0.1:{env.port}/jobs?state=")
    assert re.search(r"\d+ job\(s\), page 1 of \d+", page.inner_text(".pager"))
    page.screenshot(path=str(ARTIFACTS / "dashboard-jobs.png"), full_page=True)
    # The crasher's page: the exit status its entrypoint reported (its stderr says 3), and what
    # the result-files section says of an ended job.
    page.goto(f"http://127.0.0.1:{env.port}/job/{crashed['job_id']}")
    text = page.inner_text("#h-summary + dl")
    assert "exit status 3" in text, text
    page.wait_for_function(
        "() => document.getElementById('log').textContent.includes('exiting with status 3')", timeout=15_000
    )


def test_paging_keeps_running_first_then_newest_ended() -> None:
    def job(i: int, ended: int | None) -> Any:
        return {
            "job_id": f"job_{i:032x}",
            "name": "w",
            "version": "1",
            "state": "complete" if ended else "running",
            "created_ms": i,
            "ended_ms": ended,
            "session_id": None,
            "parent_session_id": None,
            "delegation_id": f"dlg_{i}",
            "uid": 0,
        }

    jobs = [job(i, 1000 + i) for i in range(60)] + [job(99, None)]
    first, total = filter_jobs(jobs, JobFilter())
    assert total == 61 and len(first) == PAGE and first[0]["ended_ms"] is None
    assert [j["ended_ms"] for j in first[1:3]] == [1059, 1058]
    last, _ = filter_jobs(jobs, JobFilter(page=3))
    assert [j["ended_ms"] for j in last] == [1010 - k for k in range(11)]
    assert JobFilter.of({"state": "nonsense", "page": "x"}) == JobFilter()


def test_events_page_filters_and_follows(env: Env, browser: Any) -> None:
    page = _open(browser, env)
    page.goto(f"http://127.0.0.1:{env.port}/eventlog?q=roost.process.start")
    page.wait_for_selector("#conn[data-state=live]", timeout=15_000)
    ops = page.locator("#events li").evaluate_all("r => r.map(x => x.dataset.operation)")
    assert ops and set(ops) == {"roost.process.start"}
    before = page.locator("#events li").count()
    env.ctl("spawn", "sleeper@0.1.0", "--task", "0", "--wait")
    page.wait_for_function(f"() => document.querySelectorAll('#events li').length > {before}", timeout=15_000)
    assert set(page.locator("#events li").evaluate_all("r => r.map(x => x.dataset.operation)")) == {
        "roost.process.start"
    }
    page.screenshot(path=str(ARTIFACTS / "dashboard-events.png"), full_page=True)


def test_favicon_and_leaving_pages_is_no_server_error(env: Env, browser: Any) -> None:
    cookie = _cookie(env)
    conn = http.client.HTTPConnection("127.0.0.1", env.port, timeout=10)
    conn.request("GET", "/favicon.ico", headers={"Cookie": cookie, "Host": f"127.0.0.1:{env.port}"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type", "").startswith("image/svg+xml") and resp.read()
    page = _open(browser, env)
    assert page.locator("link[rel=icon]").get_attribute("href") == "/favicon.ico"
    job = env.ctl("spawn", "sleeper@0.1.0", "--task", "30", "--json").json  # type: ignore[attr-defined]
    for _ in range(6):  # pages with live streams, left before they end
        for path in ("/", f"/job/{job['job_id']}", "/eventlog", "/jobs"):
            page.goto(f"http://127.0.0.1:{env.port}{path}")
            page.wait_for_timeout(150)
    page.close()
    time.sleep(1.0)
    env.ctl("cancel", job["job_id"])
    env.dashboard.terminate()  # what it said while the pages came and went (a fresh one is started below)
    _, err = env.dashboard.communicate(timeout=30)
    assert "HTTP 500" not in err and "could not serve" not in err, err
    restart = subprocess.Popen(
        [sys.executable, "-m", "roost.ctl.main", "--state-dir", str(env.state), "dashboard", "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert restart.stdout is not None
    env.url = restart.stdout.readline().strip()
    env.port = int(env.url.split(":")[2].split("/")[0])
    env.dashboard = restart


@pytest.fixture
def lone(tmp_path: Path) -> Iterator[tuple[Path, str, subprocess.Popen[str], subprocess.Popen[bytes]]]:
    from ops.support import EXAMPLES

    cfg = tmp_path / "roost.toml"
    cfg.write_text(f'registry_path = "{EXAMPLES}"\nspawn_allow = ["sleeper"]\nstate_dir = "state"\nport = 0\n')
    state = tmp_path / "state"
    daemon = subprocess.Popen(
        [sys.executable, "-m", "roost", "--config", str(cfg)],
        env=daemon_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: roostctl("status", state_dir=state).code == 0, timeout=30, interval=0.1)
    dash = subprocess.Popen(
        [sys.executable, "-m", "roost.ctl.main", "--state-dir", str(state), "dashboard", "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert dash.stdout is not None
    url = dash.stdout.readline().strip()
    try:
        yield state, url, dash, daemon
    finally:
        for proc in (dash, daemon):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)


def test_drain_is_pushed_live_and_a_stopped_daemon_is_a_sentence(lone: Any, browser: Any) -> None:
    state, url, dash, daemon = lone
    page = browser.new_context(viewport={"width": 1100, "height": 700}).new_page()
    page.goto(url)
    page.wait_for_selector("#daemon[data-state=serving]", timeout=15_000)
    sleeper = roostctl("spawn", "sleeper@0.1.0", "--task", "3", "--json", state_dir=state).json
    assert roostctl("drain", state_dir=state).code == 0
    page.wait_for_selector("#daemon[data-state=draining]", timeout=5_000)  # pushed: no reload, no 25 s wait
    page.wait_for_selector('.gauge .badge:has-text("draining")', timeout=5_000)
    page.screenshot(path=str(ARTIFACTS / "dashboard-draining.png"), full_page=True)
    assert daemon.wait(timeout=60) == 0  # the sleeper ends, then the daemon
    page.wait_for_selector("#gone", timeout=15_000)
    text = page.inner_text("#gone")
    assert "The daemon is not running" in text and str(state / "admin.sock") in text
    assert "Cannot connect" not in page.inner_text("body") and "ssl:default" not in page.inner_text("body")
    page.reload()
    assert "Cannot connect" not in page.inner_text("body") and "The daemon is not running" in page.inner_text("body")
    page.screenshot(path=str(ARTIFACTS / "dashboard-daemon-stopped.png"), full_page=True)
    assert sleeper["job_id"]
    dash.terminate()
    _, err = dash.communicate(timeout=30)
    assert "HTTP 500" not in err, err

"""``roostctl dashboard`` in a real headless Chromium (Debian's package, driven by Playwright).

A real daemon runs a registry whose worker takes a few seconds, so the orchestrator → worker
tree can be seen appearing and then changing state while the page stays open (no reload). The
checks on who may use the dashboard are made both from the browser and with raw HTTP, including
from a process that dropped to uid 65534. Screenshots of the tree and of a timeline are saved in
``test-artifacts/`` (or ``$ROOST_TEST_ARTIFACTS``) and the path is printed.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from ops.support import REPO, daemon_env, roostctl, wait_for
from trust.attacker import NOBODY, system_python
from trust.test_malformed_requests import MALFORMED, check_answer, exchange

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(os.environ.get("ROOST_TEST_ARTIFACTS", REPO / "test-artifacts"))
TRACE_UI = "http://127.0.0.1:6006/projects/default"
EXAMPLE_CAPSULES = REPO / "deploy" / "examples" / "capsules"
SLOW_WORKER = '''#!/usr/bin/env python3
"""worker that takes its time, so a dashboard can watch it run."""
import sys, time
text = sys.stdin.read().strip()
for i in range(1, 6):
    print(f"worker: step {i} of 5", file=sys.stderr, flush=True)
    time.sleep(1)
print(f"words: {len(text.split())}")
'''


def _playwright() -> object:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is missing: tests/system-deps.sh installs it")
        pytest.skip("no /usr/bin/chromium (apt-get install chromium)")
    return pytest.importorskip("playwright.sync_api")


@dataclass
class Env:
    state: Path
    url: str
    port: int
    dashboard: subprocess.Popen[str]

    def ctl(self, *args: str) -> object:
        return roostctl(*args, state_dir=self.state)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("dash")
    registry, caps = root / "registry", root / "capsules"
    for name in ("orchestrator", "worker", "sleeper", "crasher"):
        shutil.copytree(EXAMPLE_CAPSULES / name, caps / name)
    (caps / "worker" / "main.py").write_text(SLOW_WORKER)
    for name in ("orchestrator", "worker", "sleeper", "crasher"):
        res = roostctl("registry", "add", str(caps / name), "--registry-path", str(registry))
        assert res.code == 0, res
    cfg = root / "roost.toml"
    cfg.write_text(
        f'registry_path = "{registry}"\nspawn_allow = ["orchestrator", "sleeper", "crasher"]\nstate_dir = "state"\n'
        f'port = 0\ndashboard_trace_url = "{TRACE_UI}/traces/{{trace_id}}"\n'
    )
    state = root / "state"
    daemon = subprocess.Popen(
        [sys.executable, "-m", "roost", "--config", str(cfg), "--log-format", "json"],
        env=daemon_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    dash: subprocess.Popen[str] | None = None
    try:
        wait_for(lambda: roostctl("status", state_dir=state).code == 0, timeout=30, interval=0.1)
        dash = subprocess.Popen(
            [sys.executable, "-m", "roost.ctl.main", "--state-dir", str(state), "dashboard", "--no-browser"],
            env={**os.environ, "NO_COLOR": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert dash.stdout is not None
        url = dash.stdout.readline().strip()  # the URL is the first line printed
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]{40,}", url), url
        made = Env(state, url, int(urlsplit(url).port or 0), dash)
        yield made
        dash = made.dashboard  # a test may have restarted it
    finally:
        for proc in (dash, daemon):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)


def _raw(port: int, path: str, *, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, headers={"Host": f"127.0.0.1:{port}", **(headers or {})})
    resp = conn.getresponse()
    body = resp.read().decode("utf-8", "replace")
    conn.close()
    return resp.status, body


def _cookie(env: Env) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", env.port, timeout=10)
    conn.request("GET", urlsplit(env.url).path + "?" + urlsplit(env.url).query)
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 303 and resp.getheader("Location") == "/"
    cookie = resp.getheader("Set-Cookie") or ""
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    return cookie.split(";", 1)[0]


def test_a_wrong_or_missing_token_gets_nothing(env: Env) -> None:
    for path in ("/fragment/home", "/events", "/static/app.js", "/job/x", "/favicon.ico"):
        status, body = _raw(env.port, path)
        assert status == 403 and body == "forbidden\n", (path, status, body)
    # The operator's own pages, without this run's token: a page that says how to get a valid URL,
    # and nothing about the daemon.
    for path in ("/", "/?token=wrong", "/?token=", "/jobs", "/eventlog"):
        status, body = _raw(env.port, path)
        assert status == 403 and "run <code>roostctl dashboard</code> again" in body, (path, status, body)
        assert "app.js" not in body and str(env.state) not in body
    cookie = _cookie(env)
    assert _raw(env.port, "/fragment/home", headers={"Cookie": cookie})[0] == 200
    # DNS rebinding: the right cookie under another host name is refused.
    assert _raw(env.port, "/", headers={"Cookie": cookie, "Host": f"rebound.example:{env.port}"})[0] == 403
    # Cross-site actions: no Origin, a foreign Origin, or no CSRF value are all refused.
    for extra in ({}, {"Origin": "http://evil.example"}, {"Origin": f"http://127.0.0.1:{env.port}"}):
        status, _ = _raw(env.port, "/action/drain", method="POST", headers={"Cookie": cookie, **extra})
        assert status == 403, extra
    assert env.ctl("status", "--json").json["draining"] is False  # type: ignore[attr-defined]


def test_another_uid_gets_nothing_even_with_the_token(env: Env) -> None:
    code = (
        "import sys, urllib.request, urllib.error\n"
        "try:\n    urllib.request.urlopen(sys.argv[1], timeout=10)\n    print('200')\n"
        "except urllib.error.HTTPError as e:\n    print(e.code)\n"
    )
    res = subprocess.run(
        [system_python(), "-I", "-c", code, env.url],
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.stdout.strip() == "403", res


def test_tree_appears_changes_live_timeline_and_cancel(env: Env) -> None:
    sync_api = _playwright()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots in {ARTIFACTS}")
    with sync_api.sync_playwright() as p:  # type: ignore[attr-defined]
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context(viewport={"width": 1100, "height": 760}, timezone_id="Asia/Tokyo")
            page = ctx.new_page()
            # A wrong token gets no dashboard in the browser either: a page saying how to get a valid URL.
            resp = page.goto(env.url.split("?token=")[0] + "?token=not-it")
            assert resp is not None and resp.status == 403 and "roostctl dashboard" in page.content()
            assert page.locator("#live").count() == 0
            page.screenshot(path=str(ARTIFACTS / "dashboard-token-page.png"), full_page=True)
            page.goto(env.url)
            assert page.url.rstrip("/").endswith(str(env.port))  # the token left the address bar
            page.wait_for_selector("#conn[data-state=live]", timeout=15_000)

            job = env.ctl("spawn", "orchestrator@0.1.0", "--task", "count these four words", "--json").json  # type: ignore[attr-defined]
            orch = page.locator(f'li[data-session="{job["session_id"]}"]')
            orch.locator('a.node:has-text("orchestrator@0.1.0")').first.wait_for(timeout=15_000)
            worker = orch.locator('li:has(a.node:has-text("worker@0.1.0"))')
            worker.wait_for(timeout=20_000)
            assert worker.get_attribute("data-state") == "running"
            assert "depth 1" in worker.inner_text() and "● running" in worker.inner_text()
            page.screenshot(path=str(ARTIFACTS / "dashboard-tree.png"), full_page=True)
            # The worker's own page, in a second tab: its log follows live and its state flips.
            worker_page = ctx.new_page()
            worker_page.goto(f"http://127.0.0.1:{env.port}" + str(worker.locator("a.node").first.get_attribute("href")))
            worker_page.wait_for_selector('#h-summary .badge[data-state="running"]', timeout=10_000)
            worker_page.wait_for_function(
                "() => document.getElementById('log').textContent.includes('stderr | worker: step 2 of 5')",
                timeout=15_000,
            )
            worker_page.wait_for_selector('#h-summary .badge[data-state="complete"]', timeout=30_000)
            worker_page.wait_for_function(
                "() => document.getElementById('log').textContent.includes('result | words: 4')", timeout=15_000
            )
            worker_page.close()
            # The same page, no reload: the worker's job completes, then the orchestrator's.
            page.wait_for_selector(f'li[data-session="{job["session_id"]}"][data-state="complete"]', timeout=30_000)
            assert "✓ complete" in page.locator(f'li[data-session="{job["session_id"]}"]').inner_text()
            # Times are written in the browser's zone.
            tz, shown, local = page.evaluate(
                "() => { const t = document.querySelector('time.age');"
                " return [Intl.DateTimeFormat().resolvedOptions().timeZone, t.title,"
                " new Date(Number(t.dataset.ms)).toLocaleString()]; }"
            )
            assert tz == "Asia/Tokyo" and shown == local

            # Keyboard: Tab reaches the orchestrator's node, Enter opens its job page.
            link = page.locator(f"#n-{job['session_id']}")
            for _ in range(40):
                page.keyboard.press("Tab")
                if (
                    page.evaluate("() => document.activeElement && document.activeElement.id")
                    == f"n-{job['session_id']}"
                ):
                    break
            assert link.evaluate("el => el === document.activeElement")
            page.keyboard.press("Enter")
            page.wait_for_url(f"**/job/{job['job_id']}", timeout=10_000)
            page.wait_for_selector('.row[data-lane="delegation"]', timeout=10_000)
            rows = page.locator(".row").all_inner_texts()
            assert any("delegation to worker@0.1.0: ok" in r for r in rows), rows
            assert any(r.startswith("task") for r in rows) and any("session_start" in r for r in rows)
            assert "count these four words" in page.locator("#h-input + pre").inner_text()
            page.wait_for_selector("#log b", timeout=10_000)
            assert "words: 4" in page.locator("#log").inner_text()
            page.screenshot(path=str(ARTIFACTS / "dashboard-timeline.png"), full_page=True)

            # Cancel a job from the page, with its confirmation, and see it end.
            sleeper = env.ctl("spawn", "sleeper@0.1.0", "--task", "600", "--json").json  # type: ignore[attr-defined]
            page.goto(f"http://127.0.0.1:{env.port}/job/{sleeper['job_id']}")
            page.wait_for_selector("#conn[data-state=live]", timeout=15_000)
            asked: list[str] = []
            page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
            page.get_by_role("button", name="Cancel this job…").click()
            page.wait_for_selector('#h-summary .badge[data-state="terminated"]', timeout=20_000)
            assert asked and sleeper["job_id"] in asked[0] and "sleeper@0.1.0" in asked[0]
            assert "is terminated" in page.locator("#notice").inner_text()
            shown_job = env.ctl("job", sleeper["job_id"], "--json").json  # type: ignore[attr-defined]
            assert shown_job["state"] == "terminated"
            assert shown_job["completion"]["detail"] == "an operator cancelled this job"

            # End a session from the page, with its confirmation: its record says an operator did.
            other = env.ctl("spawn", "sleeper@0.1.0", "--task", "600", "--json").json  # type: ignore[attr-defined]
            page.goto(f"http://127.0.0.1:{env.port}/job/{other['job_id']}")
            page.wait_for_selector("#conn[data-state=live]", timeout=15_000)
            asked.clear()
            page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
            page.get_by_role("button", name="End this session and its job…").click()
            page.wait_for_function(
                "() => document.getElementById('notice').textContent.includes('ended')", timeout=15_000
            )
            assert asked and other["session_id"] in asked[0]
            assert f"session {other['session_id']} ended" in page.locator("#notice").inner_text()
            ended = env.ctl("sessions", other["session_id"], "--json").json  # type: ignore[attr-defined]
            assert ended["status"] != "running" and ended["ended_ms"] is not None
            # Its job ends too: no process is left running behind an ended session.
            page.wait_for_selector('#h-summary .badge[data-state="terminated"]', timeout=20_000)
            assert f"its job {other['job_id']} is terminated" in page.locator("#notice").inner_text()
            assert env.ctl("job", other["job_id"], "--json").json["state"] == "terminated"  # type: ignore[attr-defined]
            assert asked and "and its job" in asked[0]

            # Narrow window: nothing wider than the viewport.
            page.set_viewport_size({"width": 380, "height": 800})
            page.goto(f"http://127.0.0.1:{env.port}/job/{job['job_id']}")
            page.wait_for_selector('.row[data-lane="delegation"]')
            assert page.evaluate("() => document.documentElement.scrollWidth") <= 380
            page.screenshot(path=str(ARTIFACTS / "dashboard-narrow.png"), full_page=True)
        finally:
            browser.close()
    for name in ("dashboard-tree.png", "dashboard-timeline.png"):
        assert (ARTIFACTS / name).stat().st_size > 10_000


def test_a_malformed_request_gets_a_sentence_not_its_bytes(env: Env) -> None:
    for raw, sentence in MALFORMED:
        check_answer(exchange(("127.0.0.1", env.port), raw), sentence)

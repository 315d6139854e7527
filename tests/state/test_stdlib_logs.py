"""aiohttp's own errors go through the same pipeline: JSON lines, no traceback, no request bytes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import aiohttp
import structlog
from aiohttp import web

from roost.core.ids import token_id
from roost.observe.logs import configure_logging, redact_message
from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.peer import TOKEN_RE
from tests.support.registry import RegistryBuilder


def test_a_header_over_8k_prints_no_traceback_and_no_bytes(
    tmp_path: Path, registry: RegistryBuilder, daemon_processes: list[DaemonProcess]
) -> None:
    d = start_daemon_process(["--state-dir", str(tmp_path / "state"), "--registry-path", str(registry.root)])
    daemon_processes.append(d)
    secret = "msc1." + "S3cr3tPart" * 1200  # a credential-shaped header value, far over 8 KiB
    for header in (f"x-murmur-spawn-credential: {secret}", f"x-{'q' * 9000}: 1"):
        with socket.create_connection(("127.0.0.1", d.port), timeout=10) as sock:
            sock.sendall(f"POST /spawn HTTP/1.1\r\nhost: x\r\n{header}\r\ncontent-length: 0\r\n\r\n".encode())
            answer = sock.recv(65536)
        assert answer.split(b" ", 2)[1] == b"400", answer[:200]
        assert b"Traceback" not in answer
    time.sleep(0.5)
    assert d.stop() == 0
    text = "\n".join(d.stderr_lines)
    assert "Traceback" not in text
    assert "S3cr3tPart" not in text and "qqqqqqqq" not in text
    events = []
    for line in d.stderr_lines:
        if line.startswith("mur-roost: "):
            continue
        events.append(json.loads(line))  # every other line is one JSON event
    # Our listener answers what aiohttp cannot parse itself (QuietRunner): one event per request,
    # with the status and the error's class, and nothing from aiohttp's own error path.
    noted = [e for e in events if e["event"] == "http_request_malformed"]
    assert len(noted) == 2 and all(e["status"] == 400 and e["error"] for e in noted), events
    assert not [e for e in events if e.get("logger", "").startswith("aiohttp") and e["level"] == "error"], events


async def test_an_aiohttp_error_record_is_one_event_with_its_class_and_no_traceback() -> None:
    """A handler that raises makes aiohttp log "Error handling request" with the exception: through
    the bridge that is one event with the logger and the error's class, never its text or a traceback."""
    configure_logging("json", "info")

    async def broken(request: web.Request) -> web.Response:
        raise RuntimeError(f"leaked {SECRET_TOKEN}")

    app = web.Application()
    app.router.add_get("/broken", broken)
    runner = web.AppRunner(app)  # aiohttp's own error path, not ours
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        with structlog.testing.capture_logs() as logs:
            async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/broken") as resp:
                assert resp.status == 500
    finally:
        await runner.cleanup()
    errors = [e for e in logs if e.get("logger", "").startswith("aiohttp") and e["log_level"] == "error"]
    assert len(errors) == 1, logs
    assert errors[0]["error"] == "RuntimeError", errors
    text = repr(logs)
    assert "Traceback" not in text and SECRET_TOKEN not in text and "leaked" not in text, text


SECRET_TOKEN = "msc1.c2VjcmV0LWJ5dGVz.Zm9yZ2VkLXNpZ25hdHVyZQ"


async def test_an_access_line_shows_a_peer_handle_only_by_its_id() -> None:
    """aiohttp's access log names the request's path; a handle there (well formed, cut short or
    percent-encoded) reaches the log only as ``<handle:16-hex id>``."""
    configure_logging("json", "info")

    async def peer_file(request: web.Request) -> web.Response:
        return web.Response(status=404)

    app = web.Application()
    app.router.add_get("/resources/peer/{handle}", peer_file)
    runner = web.AppRunner(app)  # aiohttp's default access log, through the stdlib bridge
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    handles = ["mh1.AAAA.AAAA", "mh1%2EBBBBsecret%2ECCCC", "mh1.DDDDsecret", "zzsecretzz"]
    try:
        with structlog.testing.capture_logs() as logs:
            async with aiohttp.ClientSession() as http:
                for handle in handles:
                    async with http.get(f"http://127.0.0.1:{port}/resources/peer/{handle}?x=1") as resp:
                        assert resp.status == 404
    finally:
        await runner.cleanup()
    access = [e for e in logs if e.get("logger") == "aiohttp.access"]
    assert len(access) == len(handles), logs
    text = repr(access)
    assert not TOKEN_RE.search(text) and "secret" not in text, text
    for handle in handles:
        assert f"/resources/peer/<handle:{token_id(unquote(handle))}>" in text


def test_redact_message_keeps_what_is_not_a_handle() -> None:
    line = '127.0.0.1 "GET /resources/peer/mh1.x.y HTTP/1.1" 404 msc1.abc.def /health'
    out = redact_message(line)
    assert out.startswith(f'127.0.0.1 "GET /resources/peer/<handle:{token_id("mh1.x.y")}> HTTP/1.1" 404 <token:')
    assert out.endswith("> /health") and "msc1.abc" not in out
    assert redact_message("GET /health 200") == "GET /health 200"


_LOG_EXCEPTION = """
import structlog
from roost.observe.logs import configure_logging
configure_logging({fmt!r}, "info")
try:
    raise ValueError("a text quoting msc1.S3cr3tPartS3cr3tPart")
except ValueError:
    structlog.get_logger("roost.t").exception("step_failed", job_id="job_1")
"""


def test_our_own_log_exception_is_one_line_with_the_class_only() -> None:
    """``log.exception`` in our code (a failed hook, a request handler that raised) writes the
    exception's class, not its traceback or its text, in both formats."""
    for fmt in ("json", "console"):
        proc = subprocess.run(
            [sys.executable, "-c", _LOG_EXCEPTION.format(fmt=fmt)], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert "Traceback" not in proc.stderr and "S3cr3tPart" not in proc.stderr
        if fmt == "json":
            event = json.loads(lines[0])
            assert (event["event"], event["error"], event["level"]) == ("step_failed", "ValueError", "error")
        else:
            assert "step_failed" in lines[0] and "ValueError" in lines[0]

"""aiohttp's own errors go through the same pipeline: JSON lines, no traceback, no request bytes."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from tests.support.daemon import DaemonProcess, start_daemon_process
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
    bridged = [e for e in events if e.get("logger", "").startswith("aiohttp")]
    assert bridged, events
    assert all(e["level"] == "error" and "error" in e for e in bridged)

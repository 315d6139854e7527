"""A request aiohttp cannot parse gets a short sentence: nothing of its bytes comes back, and the
log has one line with the status and the error's class, never a traceback or the bytes."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.registry import RegistryBuilder

SECRET = "msc1.c2VjcmV0LWJ5dGVzLXRoYXQtbXVzdC1ub3QtY29tZS1iYWNr.Zm9yZ2VkLXNpZ25hdHVyZQ"

MALFORMED = [
    (
        f"GET /health HTTP/1.1\r\nHost: x\r\nBad Header {SECRET}\r\n\r\n".encode(),
        "malformed HTTP request: it could not be read as HTTP/1.1",
    ),
    (f"GE\x01T /{SECRET} HTTP/1.1\r\n\r\n".encode(), None),
    (f"GET /health HTTP/1.1\r\nContent-Length: {SECRET}\r\n\r\n".encode(), None),
    (f"GET /health HTTP/1.1\r\nX-Long: {SECRET}{'a' * 9000}\r\n\r\n".encode(), None),
]


def exchange(address: str | tuple[str, int], raw: bytes) -> bytes:
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(address)
        sock.sendall(raw)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def check_answer(answer: bytes, sentence: str | None) -> None:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.") and b" 400 " in head.split(b"\r\n")[0], answer
    assert b"application/json" in head, answer
    error = json.loads(body)["error"]
    assert error.startswith("malformed HTTP request: "), error
    if sentence is not None:
        assert error == sentence
    assert SECRET.encode() not in answer and b"msc1." not in answer and b"^" not in body, answer


def test_the_daemon_answers_a_malformed_request_with_a_sentence(
    tmp_path: Path, registry: RegistryBuilder, daemon_processes: list[DaemonProcess]
) -> None:
    d = start_daemon_process(["--registry-path", str(registry.root), "--state-dir", str(tmp_path / "state")])
    daemon_processes.append(d)
    for raw, sentence in MALFORMED:
        check_answer(exchange(("127.0.0.1", d.port), raw), sentence)
        # The admin socket's listener answers the same way.
        check_answer(exchange(str(tmp_path / "state" / "admin.sock"), raw), sentence)
    expected = 2 * len(MALFORMED)
    deadline = time.monotonic() + 10
    while sum('"http_request_malformed"' in line for line in d.stderr_lines) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert d.stop() == 0
    noted = [json.loads(line) for line in d.stderr_lines if '"http_request_malformed"' in line]
    assert len(noted) == expected, d.stderr_lines
    assert all(n["status"] == 400 and n["error"] for n in noted), noted
    for line in d.stderr_lines:
        assert SECRET not in line and "msc1." not in line and "Traceback" not in line, line

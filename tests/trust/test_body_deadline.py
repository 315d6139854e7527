"""A request body that trickles in is held to the body deadline; one that has arrived is read at once.

A local user who opens connections and sends a body a byte at a time must not hold a handler
for long: past the deadline the answer is 408 with a sentence and the connection is closed.
The deadline (30 s in the daemon) is shortened here; the daemon is a real one on loopback.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from roost.http import middleware
from tests.support.daemon import RunningDaemon

BODY = json.dumps({"session_id": "ses_0123456789abcdef", "name": "orchestrator", "version": "0.1.0"}).encode()


async def _post(port: int, pieces: list[tuple[float, bytes]]) -> tuple[int, bytes]:
    """POST /register with BODY's length, its head at once and then each ``(delay, bytes)`` piece
    of the body after its delay; the status and the rest of what the daemon answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /register HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode()

    async def send() -> None:
        for delay, piece in pieces:
            if delay:
                await asyncio.sleep(delay)
            writer.write(piece)

    writer.write(head)
    sender = asyncio.create_task(send())
    try:
        status_line = await asyncio.wait_for(reader.readline(), 10)
        rest = await asyncio.wait_for(reader.read(4096), 10)
        return int(status_line.split()[1]), rest
    finally:
        sender.cancel()
        writer.close()


async def test_a_body_sent_with_its_head_is_read(daemon: RunningDaemon) -> None:
    status, _ = await _post(daemon.port, [(0, BODY)])
    assert status == 200


async def test_a_body_arriving_after_its_head_within_the_deadline_is_read(
    daemon: RunningDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(middleware, "BODY_DEADLINE_SECS", 2.0)
    status, _ = await _post(daemon.port, [(0.2, BODY[:10]), (0.2, BODY[10:])])
    assert status == 200


async def test_a_trickled_body_is_refused_at_the_deadline(
    daemon: RunningDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(middleware, "BODY_DEADLINE_SECS", 0.5)
    pieces = [(0.2, BODY[i : i + 1]) for i in range(len(BODY))]  # all of it would take ~16 s
    started = asyncio.get_running_loop().time()
    status, rest = await _post(daemon.port, pieces)
    assert status == 408
    assert middleware.SLOW_BODY.encode() in rest
    assert b"Connection: close" in rest or b"connection: close" in rest.lower()
    assert asyncio.get_running_loop().time() - started < 5

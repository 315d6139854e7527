"""The A2A client's transport: one JSON-RPC POST through ``a2a.http1.Http1Pool`` against the same
POST through aiohttp's ``ClientSession`` (configured as the A2A client configured it before: a
total and a connect timeout, no cookie jar), same run, same server.

The server is a bare aiohttp JSON handler in its own process on core 1 that answers a Task-sized
JSON-RPC result; this process (the client) runs on core 0 and sends one request at a time over a
kept-alive connection, as the relay does to a door. What is compared is the client's CPU per
request (``time.process_time``), which is what a relayed send pays in the daemon; wall time per
request is printed beside it. Rounds alternate the two clients so a noisy neighbour hits both
alike; medians are reported. Also checked on every round: both clients got the same answer.

Run: python bench/bench_transport.py [--requests 3000] [--rounds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from yarl import URL

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _harness import CLIENT_CPU, app_script, start_script

from a2a.http1 import Http1Pool

SERVER = app_script(
    """
    from aiohttp import web

    ANSWER = {"jsonrpc": "2.0", "id": "req_1", "result": {"task": {
        "id": "tsk_" + "0" * 32, "contextId": "ctx_" + "0" * 32,
        "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": "2026-12-02T00:00:00.000Z"}}}}

    async def handler(request):
        await request.read()
        return web.json_response(ANSWER)

    def build_app():
        app = web.Application()
        app.router.add_post("/", handler)
        return app
    """
)

BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "req_1",
        "method": "SendMessage",
        "params": {
            "message": {"messageId": "msg-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]},
            "configuration": {"returnImmediately": True},
        },
    }
).encode()
HEADERS = {
    "Content-Type": "application/json",
    "A2A-Version": "1.0",
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "x-murmur-task-origin": "peer",
    "x-murmur-task-trust": "trusted",
    "x-murmur-task-seal": "v1." + "0" * 64,
}

Send = Callable[[], Awaitable[bytes]]


async def measure(send: Send, n: int) -> tuple[float, float, bytes]:
    """CPU µs and wall µs per request over ``n`` sequential requests, and the last answer."""
    answer = await send()  # the connection is open and kept before the clock starts
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        answer = await send()
    return (time.process_time() - c0) / n * 1e6, (time.perf_counter() - t0) / n * 1e6, answer


async def run(url: URL, requests: int, rounds: int) -> None:
    session = aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=30.0, sock_connect=5.0),
        raise_for_status=False,
        cookie_jar=aiohttp.DummyCookieJar(),
    )
    pool = Http1Pool(connect_timeout=5.0, total_timeout=30.0)

    async def via_aiohttp() -> bytes:
        async with session.request("POST", url, data=BODY, headers=HEADERS, allow_redirects=False) as resp:
            return await resp.read()

    async def via_pool() -> bytes:
        return (await pool("POST", url, BODY, HEADERS))[1]

    clients: dict[str, Send] = {"aiohttp ClientSession": via_aiohttp, "a2a.http1 Http1Pool": via_pool}
    cpu: dict[str, list[float]] = {name: [] for name in clients}
    wall: dict[str, list[float]] = {name: [] for name in clients}
    names = list(clients)
    try:
        for r in range(rounds):
            answers = set()
            for name in names[r % 2 :] + names[: r % 2]:
                c, w, answer = await measure(clients[name], requests)
                cpu[name].append(c)
                wall[name].append(w)
                answers.add(answer)
            if len(answers) != 1:
                raise SystemExit("the two clients got different answers")
    finally:
        await session.close()
        await pool.close()
    print(f"{rounds} rounds of {requests} sequential POSTs each, order alternated; client on core 0, server on core 1")
    for name in names:
        print(
            f"{name:24s}: CPU {statistics.median(cpu[name]):6.1f} µs/request"
            f"  wall {statistics.median(wall[name]):6.1f} µs/request"
            f"  (CPU per round: {', '.join(f'{x:.0f}' for x in cpu[name])})"
        )
    a, p = (statistics.median(cpu[n]) for n in names)
    paired = statistics.median(x / y for x, y in zip(cpu[names[0]], cpu[names[1]], strict=True))
    print(f"CPU ratio aiohttp/pool: {a / p:.2f} (median of per-round ratios {paired:.2f})")
    aw, pw = (statistics.median(wall[n]) for n in names)
    print(f"wall ratio aiohttp/pool: {aw / pw:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    server = start_script(SERVER, cpu=CLIENT_CPU)
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})
    try:
        asyncio.run(run(URL(server.url + "/"), args.requests, args.rounds))
    finally:
        server.stop()


if __name__ == "__main__":
    main()

"""Streaming: an entrypoint's write to a subscriber's receipt, events/s, memory per subscription.

The door is a real ``roost-capsule run`` session (the capsule host on core 0) whose entrypoint is a
real process writing lines to stdout; each line is the wall-clock time (``time.time_ns()``) of its
own write, flushed at once. The subscriber (this process, core 1) streams the task with
``SendStreamingMessage`` over SSE and, for every line of every artifact chunk it receives, takes
``now - written``: the whole path — the pipe, the host reading it a line at a time, the door's
record and subscription, the SSE write, the socket, the client's read. Same machine, same clock.

Measured, each over ``--rounds`` alternating rounds (their spread is printed):

* latency p50 / p99: ``--lines`` lines, one every ``--gap`` ms (a model writing tokens);
* events/s through one subscription: ``--burst`` lines written as fast as the entrypoint can; the
  stream's artifact events per second of the stream's life, and the lines they carried;
* memory per open subscription: ``--subs`` subscriptions (``SubscribeToTask``) opened to one
  running task, the door process's RSS before and after, over ``--subs``.

The baseline is the same stream through the official SDK servers (``--no-sdk`` leaves them out):
the Python SDK 1.x server (its own virtualenv) and the JS SDK server (``tests/a2a/js``), whose
executors emit one artifact update per line, each line the time of that update's enqueue — the
nearest thing to an entrypoint's write an SDK server has. Target (issue 33): door p50 <= 5 ms on
loopback.

Run: python bench/bench_stream.py [--rounds 3] [--lines 300] [--gap 2] [--burst 5000] [--subs 200] [--no-sdk]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import SERVER_CPU, Proc, make_registry, taskset
from bench_door import rss_mib, start_sdk_servers

TICKER = """
import sys, time
words = sys.stdin.read().split()
n, gap = int(words[1]), float(words[2]) / 1000
for _ in range(n):
    sys.stdout.write(f"{time.time_ns()}\\n")
    sys.stdout.flush()
    if gap:
        time.sleep(gap)
if words[0] == "hold":
    time.sleep(float(words[3]))
"""


def start_door(tmp: Path) -> Proc:
    """A real ``roost-capsule run`` session of the ticker capsule, on the server core."""
    registry = tmp / "registry"
    make_registry(registry, {"ticker": {"script": TICKER, "lifecycle": {"after_task": "sleep", "queue_depth": 64}}})
    work = tmp / "work"
    work.mkdir()
    cmd = [*taskset(SERVER_CPU), sys.executable, "-m", "roost.capsule", "run", "ticker@0.1.0", "--workdir", str(work)]
    cmd += ["--registry-path", str(registry), "--json"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    return Proc(proc, int(ready["capsule_url"].rsplit(":", 1)[1]))


def _body(method: str, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


def _message(text: str) -> dict[str, Any]:
    return {"messageId": f"m-{uuid.uuid4().hex}", "role": "ROLE_USER", "parts": [{"text": text}]}


HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0", "Accept": "text/event-stream"}


async def stream(http: aiohttp.ClientSession, url: str, text: str) -> tuple[list[float], int, float, str]:
    """One streamed send: (latency of each line in ms, artifact events, seconds from the first
    chunk to the end, task id)."""
    latencies: list[float] = []
    events = 0
    first = end = 0.0
    task_id = ""
    async with http.post(url, data=_body("SendStreamingMessage", {"message": _message(text)}), headers=HEADERS) as resp:
        async for raw in resp.content:
            if not raw.startswith(b"data:"):
                continue
            now = time.time_ns()
            item = json.loads(raw[5:])
            if "result" not in item:
                raise SystemExit(f"{url} answered an error in its stream: {item}")
            result = item["result"]
            if "task" in result:
                task_id = result["task"]["id"]
            update = result.get("artifactUpdate")
            if update is None:
                continue
            events += 1
            first = first or time.monotonic()
            end = time.monotonic()
            for part in update["artifact"]["parts"]:
                for line in part.get("text", "").split():
                    latencies.append((now - int(line)) / 1e6)
    return latencies, events, end - first, task_id


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else float("nan")


async def subscriptions_cost(http: aiohttp.ClientSession, server: Proc, n: int) -> float:
    """KiB of the server's RSS per open subscription to one running task."""
    url = server.url + "/"
    holder = await http.post(
        url, data=_body("SendStreamingMessage", {"message": _message("hold 1 0 30")}), headers=HEADERS
    )
    task_id = ""
    async for raw in holder.content:
        if raw.startswith(b"data:"):
            task_id = json.loads(raw[5:])["result"]["task"]["id"]
            break
    await asyncio.sleep(0.5)
    before = rss_mib(server.proc.pid)
    responses = []
    for _ in range(n):
        resp = await http.post(url, data=_body("SubscribeToTask", {"id": task_id}), headers=HEADERS)
        await resp.content.readline()  # the Task's line: the subscription is open
        responses.append(resp)
    await asyncio.sleep(0.5)
    after = rss_mib(server.proc.pid)
    for resp in [*responses, holder]:
        resp.close()
    return (after - before) * 1024 / n


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        servers: dict[str, Proc] = {"door": start_door(Path(tmp))}
        if not args.no_sdk:
            servers |= start_sdk_servers()
        lat: dict[str, list[list[float]]] = {n: [] for n in servers}
        rate: dict[str, list[tuple[float, float]]] = {n: [] for n in servers}
        try:
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as http:
                for server in servers.values():  # warm-up
                    await stream(http, server.url + "/", "tick 20 1")
                for r in range(args.rounds):
                    order = list(servers)[r % len(servers) :] + list(servers)[: r % len(servers)]
                    for name in order:
                        url = servers[name].url + "/"
                        values, _, _, _ = await stream(http, url, f"tick {args.lines} {args.gap}")
                        lat[name].append(values)
                        _, events, secs, _ = await stream(http, url, f"tick {args.burst} 0")
                        lines = args.burst
                        rate[name].append(
                            (events / secs if secs else float("nan"), lines / secs if secs else float("nan"))
                        )
                        print(
                            f"  round {r + 1} {name:6}: p50 {pct(values, 50):7.3f} ms  p99 {pct(values, 99):7.3f} ms"
                            f"  burst {rate[name][-1][0]:8.0f} events/s ({rate[name][-1][1]:8.0f} lines/s)",
                            flush=True,
                        )
                memory = {name: await subscriptions_cost(http, server, args.subs) for name, server in servers.items()}
        finally:
            for server in servers.values():
                server.stop()
    print(
        f"{args.rounds} rounds; {args.lines} lines {args.gap} ms apart;"
        f" bursts of {args.burst}; {args.subs} subscriptions"
    )
    for name in servers:
        everything = [v for values in lat[name] for v in values]
        p50s = [round(pct(v, 50), 3) for v in lat[name]]
        p99s = [round(pct(v, 99), 3) for v in lat[name]]
        ev = statistics.median(e for e, _ in rate[name])
        ln = statistics.median(li for _, li in rate[name])
        print(
            f"{name:6}: write->subscriber p50 {pct(everything, 50):7.3f} ms (rounds {p50s})"
            f"  p99 {pct(everything, 99):7.3f} ms (rounds {p99s})"
        )
        spread = [round(e) for e, _ in rate[name]]
        print(f"        one subscription: {ev:8.0f} events/s, {ln:8.0f} lines/s (rounds {spread})")
        print(f"        memory per open subscription: {memory[name]:6.1f} KiB")
    door_p50 = pct([v for values in lat["door"] for v in values], 50)
    print(f"target door p50 <= 5 ms      : {'met' if door_p50 <= 5 else 'NOT met'} ({door_p50:.3f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lines", type=int, default=300)
    ap.add_argument("--gap", type=float, default=2.0, help="ms between two lines of the latency run")
    ap.add_argument("--burst", type=int, default=5000)
    ap.add_argument("--subs", type=int, default=200)
    ap.add_argument("--no-sdk", action="store_true")
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()

"""Door throughput: ``SendMessage`` with ``returnImmediately: true`` against a bare aiohttp JSON handler.

Both servers run in their own process on core 0; wrk (-t1 -c50) runs on the other core. The door
has an instant runner (the benchmark measures the door — parse, classify, admit, answer — not a
capsule's work), so every request is a real admission: a task is minted, queued, run and
retired. The baseline is the least a JSON-RPC endpoint on aiohttp can do: read the body,
``json.loads`` it, answer a Task-sized ``json.dumps``. Rounds alternate door and baseline so a
noisy neighbour hits both alike; medians are reported. Target: door >= 0.7x the baseline.

``--before PATH`` adds a third server: the same door imported from another checkout (e.g. a
``git worktree`` of the previous commit), so a change is measured before/after in the same run.
Besides req/s, the CPU each server spends per request (from ``/proc``) is printed: on a shared
machine it is steadier than throughput. The order of the servers rotates from round to round.

``--inproc`` (with ``--before``) measures only the door's own work, in process and without HTTP:
CPU per request of parse → classify → admit → answer → run, for this checkout and the other one,
alternating; the figure a shared machine's noise disturbs least.

Run: python bench/bench_door.py [--seconds 5] [--rounds 3] [--before PATH] [--inproc]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import SERVER_CPU, Proc, WrkResult, app_script, median_by, start_script, taskset, wrk

DOOR_SERVER = app_script(
    """
    from a2a.door import Door, TaskOutcome

    async def runner(task):
        return TaskOutcome.completed("ok")

    def build_app():
        return Door(name="bench", version="0.1.0", session_id="ses_bench", runner=runner,
                    queue_depth=10000, peer_tasks_accept=True).app
    """
)

BARE_SERVER = app_script(
    """
    import json
    from aiohttp import web

    async def handler(request):
        req = json.loads(await request.read())
        task = {"id": "tsk_01a22f5b4b34707bb3ae2fc6fe3075c3", "contextId": "ctx_01a22f5b4b34707bb3ae2fc6fe3075c4",
                "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": "2026-12-01T02:00:00.000Z"}}
        body = json.dumps({"jsonrpc": "2.0", "id": req.get("id"), "result": {"task": task}}, separators=(",", ":"))
        return web.Response(body=body.encode(), content_type="application/json")

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
            "message": {"messageId": "msg-1", "role": "ROLE_USER", "parts": [{"text": "hello door"}]},
            "configuration": {"returnImmediately": True},
        },
    }
)
HEADERS = {"content-type": "application/json", "A2A-Version": "1.0", "x-murmur-task-origin": "peer"}


def start_from(code: str, tree: str) -> Proc:
    """:func:`start_script` with ``tree`` first on the import path (another checkout's code)."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    cmd = [*taskset(SERVER_CPU), sys.executable, "-c", code]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, cwd=tree)  # -c puts the cwd first on the path
    assert proc.stdout is not None
    return Proc(proc, int(proc.stdout.readline().decode().strip()))


def cpu_secs(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


INPROC = """
import asyncio, json, sys, time
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict
from a2a import jsonrpc
from a2a.door import Door, TaskOutcome

BODY, HEADERS = json.loads(sys.argv[1]).values()

async def runner(task):
    return TaskOutcome.completed("ok")

async def main():
    door = Door(name="bench", version="0.1.0", session_id="ses_bench", runner=runner,
                queue_depth=100000, peer_tasks_accept=True)
    request = make_mocked_request("POST", "/", headers=CIMultiDict(HEADERS))
    body = BODY.encode()

    async def one():
        req = jsonrpc.parse_request(body)
        return jsonrpc.result_body(req.id, await door._dispatch(req, request))

    for i in range(20000):
        await one()
        if i % 50 == 0:
            await asyncio.sleep(0)  # let the worker run the queued tasks, as it would between requests
    await door.drain()
    n, t0 = 20000, time.process_time()
    for i in range(n):
        await one()
        if i % 50 == 0:
            await asyncio.sleep(0)
    await door.drain()
    print((time.process_time() - t0) / n * 1e6)

asyncio.run(main())
"""


def inproc(before: str, rounds: int) -> None:
    """CPU per request of the door's own work, this checkout against ``before``, alternating."""
    arg = json.dumps({"body": BODY, "headers": HEADERS})
    trees = {"door (this checkout)": str(Path(__file__).resolve().parent.parent), "door (--before)": before}
    figures: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(rounds):
        for name, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
            cmd = [*taskset(SERVER_CPU), sys.executable, "-c", INPROC, arg]
            out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree, check=True)
            figures[name].append(float(out.stdout))
    mine, theirs = (statistics.median(v) for v in figures.values())
    for name, values in figures.items():
        print(f"{name:22}: {statistics.median(values):6.2f} us CPU/request  (rounds: {[round(v, 2) for v in values]})")
    print(f"this/before            : {mine / theirs:6.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--before", help="another checkout whose door is measured in the same run")
    ap.add_argument("--inproc", action="store_true", help="the door's own work only, against --before")
    args = ap.parse_args()
    if args.inproc:
        if not args.before:
            raise SystemExit("--inproc compares with another checkout: give --before PATH")
        inproc(args.before, args.rounds)
        return
    servers = {"door": start_script(DOOR_SERVER), "bare": start_script(BARE_SERVER)}
    if args.before:
        servers["before"] = start_from(DOOR_SERVER, args.before)
    runs: dict[str, list[WrkResult]] = {name: [] for name in servers}
    cpu: dict[str, list[float]] = {name: [] for name in servers}
    try:
        for proc in servers.values():  # warm-up
            wrk(proc.url + "/", method="POST", body=BODY, headers=HEADERS, seconds=2)
        for r in range(args.rounds):
            order = list(servers.items())
            order = order[r % len(order) :] + order[: r % len(order)]
            for name, proc in order:
                c0 = cpu_secs(proc.proc.pid)
                res = wrk(
                    proc.url + "/",
                    method="POST",
                    body=BODY,
                    headers=HEADERS,
                    seconds=args.seconds,
                    connections=args.connections,
                )
                runs[name].append(res)
                cpu[name].append((cpu_secs(proc.proc.pid) - c0) / max(1.0, res.rps * args.seconds) * 1e6)
    finally:
        for proc in servers.values():
            proc.stop()
    bare = median_by(runs["bare"], "rps")
    bare_cpu = statistics.median(cpu["bare"])
    labels = {
        "door": "door SendMessage (immediate)",
        "before": "door, --before checkout",
        "bare": "bare aiohttp JSON handler",
    }
    for name in servers:
        r = median_by(runs[name], "rps")
        c = statistics.median(cpu[name])
        print(
            f"{labels[name]:29}: {r.rps:9.0f} req/s  p50 {r.p50_ms:6.2f} ms  p99 {r.p99_ms:6.2f} ms  non-2xx {r.non2xx}"
            f"  cpu {c:6.1f} us/req  (ratio rps {r.rps / bare.rps:4.2f}, cpu bare/this {bare_cpu / c:4.2f})"
        )
    ratio = median_by(runs["door"], "rps").rps / bare.rps
    print(f"ratio door/bare              : {ratio:6.2f}  (target >= 0.7: {'met' if ratio >= 0.7 else 'NOT met'})")


if __name__ == "__main__":
    main()

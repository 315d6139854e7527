"""Door throughput: ``SendMessage`` with ``returnImmediately: true`` against a bare aiohttp JSON handler.

All servers run in their own process on core 0; wrk (-t1 -c50) runs on the other core. The door is
configured and served as the capsule host does it (``identify`` by the caller's uid, a seal key, a
local owner; its plain handler ``Door.handle``, no Application) with an instant runner (the
benchmark measures the door — parse, validate, classify, admit, answer — not a capsule's work), so
every request is a real admission: a task is minted, queued, run and retired. Every request carries
a message id of its own (the door answers a message id it has seen with that message's task, which
would be no admission at all). A second door server ("hosted") puts in front of it what the
capsule host does (``roost/capsule/host.py``): the authorization table's guard (the caller's
class, ``Host``/``Origin``, the body deadline) and the peer-file routes; the targets are reported
for the plain door, as they were set, and the hosted door's figures beside them.

The baseline is a JSON endpoint as an aiohttp user writes it: ``await request.json()``, answer a
Task-sized ``web.json_response``. A second one, with orjson on both sides, is printed for
information (the door itself uses orjson). The official SDK servers are baselines too, each in its
own environment, serving the same ``SendMessage`` (JSON-RPC at ``/``, an executor that completes
each task at once, their in-memory task stores; ``bench/sdkservers/``): the Python SDK 1.x
(Starlette under uvicorn, from the pinned virtualenv of ``tests/a2a/sdk-env.sh``) and the JS SDK
(express under Node.js, from ``tests/a2a/js``); ``--no-sdk`` leaves them out. Rounds rotate the
servers so a noisy neighbour hits all alike. Two ratios are reported: of the medians, and paired
(the median of each round's own ratio), with each round's own printed (the spread). This VM's
speed drifts over seconds, and rounds next to each other drift together, so many short rounds
pair better than a few long ones. Targets, each met only when both ratios meet it: door >= 3x the
faster SDK server in req/s; bare/door >= 0.75 in CPU per request; (older) door >= 0.7x bare in
req/s. After the rounds, ``--rss N`` (default 100,000) sends N more requests to the door and
prints its RSS along the way: flat means it keeps a bounded number of finished tasks. Every
server's RSS after the rounds is printed beside it.

``--before PATH`` adds a server: the same door imported from another checkout (e.g. a
``git worktree`` of the previous commit), so a change is measured before/after in the same run.
Besides req/s, the CPU each server spends per request (from ``/proc``) is printed: on a shared
machine it is steadier than throughput.

``--inproc`` measures only the door's own work, in process and without HTTP: CPU per request of
parse → classify → admit → answer → run, for this checkout (and ``--before``, alternating).

``--instructions`` counts instead of timing: each server runs under valgrind's callgrind and
serves ``--small`` and then, in a second process, ``--large`` requests (50 at a time, each with
a message id of its own); the difference of the two totals over the difference of the counts is
the instructions one request costs, start-up and shutdown cancelled out. Counts do not depend
on what else the machine is doing, so the ratio bare/door is the same on a busy box and a quiet
one, where req/s on this shared 2-vCPU VM swings by a quarter between rounds of one run. It
counts the whole server process: aiohttp, the door, and the task run after the answer. With
``--cache-sim`` callgrind also simulates the caches and the branch predictor, and the report gives
door/bare per request for each event (first-level and last-level misses, mispredicted branches):
whether the door's misses grow faster than its instructions, which the count alone would hide.
``--ll BYTES`` simulates a last-level cache of that size (16-way, 64-byte lines) instead of the
host's: a VM whose neighbours share its L3 has far less of it than ``lscpu`` says.

Run: python bench/bench_door.py [--seconds 2] [--rounds 9] [--before PATH]
     python bench/bench_door.py --inproc [--before PATH]
     python bench/bench_door.py --instructions [--cache-sim [--ll BYTES]] [--small 500] [--large 2500] [--before PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (
    REPO,
    SERVER_CPU,
    Proc,
    WrkResult,
    app_script,
    callgrind_events,
    checkout_env,
    median_by,
    post_json,
    start_script,
    taskset,
    wrk,
)

DOOR_SERVER = app_script(
    """
    import os
    from a2a.door import Door, TaskOutcome
    from roost.capsule.serving import loopback_owner

    async def runner(task):
        return TaskOutcome.completed("ok")

    DOOR = Door(name="bench", version="0.1.0", session_id="ses_bench", runner=runner,
                queue_depth=10000, peer_tasks_accept=True, seal_key=bytes(32),
                identify=loopback_owner, local_owner=f"uid:{os.getuid()}")

    def build_handler():  # as the capsule host serves it (a checkout before Door.handle: its app)
        return getattr(DOOR, "handle", None)

    def build_app():
        return DOOR.app
    """
)

HOSTED_SERVER = app_script(
    """
    import os
    from a2a.door import Door, TaskOutcome
    from roost.capsule.serving import loopback_owner

    async def runner(task):
        return TaskOutcome.completed("ok")

    DOOR = Door(name="bench", version="0.1.0", session_id="ses_bench", runner=runner,
                queue_depth=10000, peer_tasks_accept=True, seal_key=bytes(32),
                identify=loopback_owner, local_owner=f"uid:{os.getuid()}")

    def build_handler():  # as roost/capsule/host.py serves it: the table's guard, the peer routes
        try:
            from roost.capsule.peerdoor import PeerDoor
            from roost.core.authz import Listener
            from roost.http.authz import EdgeNames, guard_handler
        except ImportError:  # a checkout before the authorization table: its door as it served it
            return getattr(DOOR, "handle", None)
        peer = PeerDoor(None, credential=lambda: None, http=lambda: None)
        return guard_handler(Listener.DOOR, peer.wrap(DOOR.handle), names=EdgeNames(lambda: (DOOR.url,)))

    def build_app():
        return DOOR.app

    def on_port(port):
        DOOR.url = f"http://127.0.0.1:{port}"
    """
)
"""The same door behind what the capsule host puts in front of it (the authorization table's
check of the caller, Host and Origin, the body deadline, the peer-file routes)."""

_TASK = """
        task = {"id": "tsk_01a22f5b4b34707bb3ae2fc6fe3075c3", "contextId": "ctx_01a22f5b4b34707bb3ae2fc6fe3075c4",
                "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": "2026-12-01T02:00:00.000Z"}}
"""

BARE_SERVER = app_script(
    """
    from aiohttp import web

    async def handler(request):
        req = await request.json()
"""
    + _TASK
    + """
        return web.json_response({"jsonrpc": "2.0", "id": req.get("id"), "result": {"task": task}})

    def build_app():
        app = web.Application()
        app.router.add_post("/", handler)
        return app
    """
)

SDK_DIR = Path(__file__).resolve().parent / "sdkservers"


def sdk_python() -> str:
    """The official Python SDK's interpreter, from its pinned virtualenv (built if missing)."""
    out = subprocess.run(
        ["bash", str(REPO / "tests" / "a2a" / "sdk-env.sh")], capture_output=True, text=True, check=True
    )
    return out.stdout.strip().splitlines()[-1]


def start_program(argv: list[str], cwd: str | None = None) -> Proc:
    """A server program (not our python) on the server core that prints its port first."""
    proc = subprocess.Popen([*taskset(SERVER_CPU), *argv], stdout=subprocess.PIPE, cwd=cwd)
    assert proc.stdout is not None
    return Proc(proc, int(proc.stdout.readline().decode().strip()))


def start_sdk_servers() -> dict[str, Proc]:
    js_dir = REPO / "tests" / "a2a" / "js"
    servers: dict[str, Proc] = {}
    servers["sdk-py"] = start_program([sdk_python(), "-I", str(SDK_DIR / "sdk_server.py")], cwd=tempfile.gettempdir())
    script = js_dir / ".bench-server.mjs"  # beside node_modules, so its imports resolve
    script.write_text((SDK_DIR / "sdk_server.mjs").read_text())
    try:
        servers["sdk-js"] = start_program(["node", str(script)], cwd=str(js_dir))
    finally:
        time.sleep(0.5)
        script.unlink(missing_ok=True)
    return servers


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_over(proc: Proc, total: int, connections: int) -> list[tuple[int, float]]:
    """Send ``total`` more requests (in quarters, by wrk's time) and the RSS after each quarter."""
    points = [(0, rss_mib(proc.proc.pid))]
    sent = 0
    while sent < total:
        res = run_wrk(proc.url, 5, connections)
        sent += int(res.rps * 5)
        points.append((sent, rss_mib(proc.proc.pid)))
    return points


BARE_ORJSON_SERVER = app_script(
    """
    import orjson
    from aiohttp import web

    async def handler(request):
        req = orjson.loads(await request.read())
"""
    + _TASK
    + """
        body = orjson.dumps({"jsonrpc": "2.0", "id": req.get("id"), "result": {"task": task}})
        return web.Response(body=body, content_type="application/json")

    def build_app():
        app = web.Application()
        app.router.add_post("/", handler)
        return app
    """
)

COUNTER = "@N@"
"""Where each request's own number goes in :data:`BODY` (the message id)."""
BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "req_1",
        "method": "SendMessage",
        "params": {
            "message": {"messageId": f"msg-{COUNTER}", "role": "ROLE_USER", "parts": [{"text": "hello door"}]},
            "configuration": {"returnImmediately": True},
        },
    }
)
HEADERS = {"content-type": "application/json", "A2A-Version": "1.0"}


def run_wrk(url: str, seconds: int, connections: int = 50) -> WrkResult:
    """One wrk run whose message ids are unique, also against earlier runs on the same server."""
    body = BODY.replace(COUNTER, f"{uuid.uuid4().hex[:12]}-{COUNTER}")
    return wrk(
        url + "/", method="POST", body=body, headers=HEADERS, seconds=seconds, connections=connections, counter=COUNTER
    )


def start_from(code: str, tree: str) -> Proc:
    """:func:`start_script` with ``tree`` first on the import path (another checkout's code)."""
    cmd = [*taskset(SERVER_CPU), sys.executable, "-c", code]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=checkout_env(tree))
    assert proc.stdout is not None
    return Proc(proc, int(proc.stdout.readline().decode().strip()))


def cpu_secs(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


INPROC = """
import asyncio, json, sys, time
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict
from a2a.protocol import jsonrpc
from a2a.door import Door, TaskOutcome

BODY, HEADERS, COUNTER = json.loads(sys.argv[1]).values()

async def runner(task):
    return TaskOutcome.completed("ok")

async def main():
    door = Door(name="bench", version="0.1.0", session_id="ses_bench", runner=runner,
                queue_depth=100000, peer_tasks_accept=True)
    request = make_mocked_request("POST", "/", headers=CIMultiDict(HEADERS))
    n = 20000
    bodies = [BODY.replace(COUNTER, str(i)).encode() for i in range(2 * n)]
    parse = getattr(jsonrpc, "parse_body", None) or jsonrpc.parse_request

    async def one(body):
        req = parse(body)
        return jsonrpc.result_body(req.id, await door._dispatch(req, request))

    for i in range(n):
        await one(bodies[i])
        if i % 50 == 0:
            await asyncio.sleep(0)  # let the worker run the queued tasks, as it would between requests
    await door.drain()
    t0 = time.process_time()
    for i in range(n, 2 * n):
        await one(bodies[i])
        if i % 50 == 0:
            await asyncio.sleep(0)
    await door.drain()
    print((time.process_time() - t0) / n * 1e6)

asyncio.run(main())
"""


def inproc(before: str | None, rounds: int) -> None:
    """CPU per request of the door's own work, this checkout against ``before``, alternating."""
    arg = json.dumps({"body": BODY, "headers": HEADERS, "counter": COUNTER})
    trees = {"door (this checkout)": str(Path(__file__).resolve().parent.parent)}
    if before:
        trees["door (--before)"] = before
    figures: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(rounds):
        for name, tree in trees.items():
            cmd = [*taskset(SERVER_CPU), sys.executable, "-c", INPROC, arg]
            out = subprocess.run(cmd, capture_output=True, text=True, env=checkout_env(tree), check=True)
            figures[name].append(float(out.stdout))
    for name, values in figures.items():
        print(f"{name:22}: {statistics.median(values):6.2f} us CPU/request  (rounds: {[round(v, 2) for v in values]})")
    if before:
        mine, theirs = (statistics.median(v) for v in figures.values())
        print(f"this/before            : {mine / theirs:6.2f}")


async def _serve_requests(port: int, n: int, concurrency: int = 50) -> None:
    """``n`` SendMessage requests (``concurrency`` at a time), each a new message; every answer
    must be a JSON-RPC result."""
    import aiohttp

    tag = uuid.uuid4().hex[:12]
    url = f"http://127.0.0.1:{port}/"
    numbers = iter(range(n))
    failures: list[str] = []

    async def worker(http: aiohttp.ClientSession) -> None:
        for i in numbers:
            body = BODY.replace(COUNTER, f"{tag}-{i}").encode()
            async with http.post(url, data=body, headers=HEADERS) as resp:
                answer = await resp.json(content_type=None)
                if resp.status != 200 or "result" not in answer:
                    failures.append(f"{resp.status} {str(answer)[:200]}")

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as http:
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
    if failures:
        raise SystemExit(f"{len(failures)} of {n} requests failed under callgrind, e.g. {failures[0]}")


def callgrind_total(
    code: str, tree: str | None, n: int, cache_sim: bool = False, ll: int | None = None
) -> dict[str, int]:
    """The events (``Ir``: instructions; with ``cache_sim`` also cache misses and mispredicted
    branches) of a server process from its start to its end, serving ``n`` requests."""
    with tempfile.TemporaryDirectory(prefix="roost-bench-cg-") as tmp:
        out = Path(tmp) / "callgrind.out"
        env = checkout_env(tree) if tree else None
        sim = ["--cache-sim=yes", "--branch-sim=yes"] if cache_sim else []
        if cache_sim and ll is not None:
            sim.append(f"--LL={ll},16,64")
        cmd = ["valgrind", "--tool=callgrind", *sim, f"--callgrind-out-file={out}", sys.executable, "-c", code]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=tree)
        assert proc.stdout is not None
        try:
            port = int(proc.stdout.readline().decode().strip())
            asyncio.run(_serve_requests(port, n))
            time.sleep(1.0)  # the door runs and retires the tasks it answered at once
        finally:
            proc.terminate()
            proc.wait(timeout=300)
        return callgrind_events(out)


def instructions(before: str | None, small: int, large: int, cache_sim: bool = False, ll: int | None = None) -> None:
    """Instructions per request of the door and the bare handler (and ``before``), by callgrind."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    if large <= small:
        raise SystemExit("--large must be more requests than --small")
    servers: dict[str, tuple[str, str | None]] = {
        "door": (DOOR_SERVER, None),
        "hosted": (HOSTED_SERVER, None),
        "bare": (BARE_SERVER, None),
    }
    if before:
        servers["before"] = (DOOR_SERVER, before)
        servers["hosted-b"] = (HOSTED_SERVER, before)
    per: dict[str, float] = {}
    events: dict[str, dict[str, float]] = {}
    for name, (code, tree) in servers.items():
        low, high = (callgrind_total(code, tree, n, cache_sim, ll) for n in (small, large))
        events[name] = {e: (high[e] - low[e]) / (large - small) for e in high}
        per[name] = events[name]["Ir"]
        print(f"  {name:7}: {low['Ir']:,} instructions for {small} requests, {high['Ir']:,} for {large}", flush=True)
    if cache_sim:
        # I1mr/D1mr/D1mw: first-level misses; ILmr/DLmr/DLmw: last-level; Bcm/Bim: mispredicted branches.
        for event in events["door"]:
            door, bare = events["door"][event], events["bare"][event]
            ratio = f"{door / bare:5.2f}" if bare >= 1.0 else "    -"
            print(f"  {event:5} per request: door {door:10.1f}  bare {bare:10.1f}  door/bare {ratio}")
    for name, count in per.items():
        print(f"{name:7} : {count / 1000:8.1f}k instructions/request  (bare/this {per['bare'] / count:4.2f})")
    ratio = per["bare"] / per["door"]
    print(f"ratio door/bare (instructions): {ratio:5.2f}  (target >= 0.7: {'met' if ratio >= 0.7 else 'NOT met'})")
    print(f"ratio hosted/bare (instructions): {per['bare'] / per['hosted']:5.2f}  (the door as the host serves it)")
    if before:
        print(f"this/before (instructions)    : {per['door'] / per['before']:5.3f}")
        print(f"hosted this/before            : {per['hosted'] / per['hosted-b']:5.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--rounds", type=int, help="rounds (default 9; 3 for --inproc)")
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--before", help="another checkout whose door is measured in the same run")
    ap.add_argument("--inproc", action="store_true", help="the door's own work only, against --before")
    ap.add_argument("--instructions", action="store_true", help="instructions per request, counted by callgrind")
    ap.add_argument("--small", type=int, default=500, help="--instructions: requests in the first count")
    ap.add_argument("--large", type=int, default=2500, help="--instructions: requests in the second count")
    ap.add_argument("--cache-sim", action="store_true", help="--instructions: also simulated cache and branch misses")
    ap.add_argument("--ll", type=int, metavar="BYTES", help="--cache-sim: the simulated last-level cache's size")
    ap.add_argument("--no-sdk", action="store_true", help="leave out the official SDK servers")
    ap.add_argument(
        "--rss", type=int, default=100_000, help="requests after the rounds over which the door's RSS is read"
    )
    args = ap.parse_args()
    if args.cache_sim and not args.instructions:
        raise SystemExit("--cache-sim goes with --instructions")
    if args.ll is not None and (not args.cache_sim or args.ll < 65536 or args.ll & (args.ll - 1)):
        raise SystemExit("--ll goes with --cache-sim and is a power of two of at least 65536 bytes")
    if args.instructions:
        instructions(args.before, args.small, args.large, args.cache_sim, args.ll)
        return
    if args.inproc:
        inproc(args.before, args.rounds or 3)
        return
    servers = {
        "door": start_script(DOOR_SERVER),
        "hosted": start_script(HOSTED_SERVER),
        "bare": start_script(BARE_SERVER),
        "orjson": start_script(BARE_ORJSON_SERVER),
    }
    if args.before:
        servers["before"] = start_from(DOOR_SERVER, args.before)
    if not args.no_sdk:
        servers |= start_sdk_servers()
    runs: dict[str, list[WrkResult]] = {name: [] for name in servers}
    cpu: dict[str, list[float]] = {name: [] for name in servers}
    try:
        for name, proc in servers.items():  # wrk counts a JSON-RPC error (HTTP 200) as an answer: check one
            answer = post_json(proc.url + "/", json.loads(BODY.replace(COUNTER, uuid.uuid4().hex)), HEADERS)
            if "result" not in answer:
                raise SystemExit(f"{name} did not answer SendMessage with a result: {str(answer)[:300]}")
        for proc in servers.values():  # warm-up
            run_wrk(proc.url, 2)
        for r in range(args.rounds or 9):
            order = list(servers.items())
            order = order[r % len(order) :] + order[: r % len(order)]
            for name, proc in order:
                c0 = cpu_secs(proc.proc.pid)
                res = run_wrk(proc.url, args.seconds, args.connections)
                runs[name].append(res)
                cpu[name].append((cpu_secs(proc.proc.pid) - c0) / max(1.0, res.rps * args.seconds) * 1e6)
                print(f"  round {r + 1} {name:7}: {res.rps:9.0f} req/s  cpu {cpu[name][-1]:6.1f} us/req", flush=True)
        rss = {name: rss_mib(proc.proc.pid) for name, proc in servers.items()}
        rss_points = rss_over(servers["door"], args.rss, args.connections) if args.rss else []
    finally:
        for proc in servers.values():
            proc.stop()
    bare = median_by(runs["bare"], "rps")
    bare_cpu = statistics.median(cpu["bare"])
    labels = {
        "door": "door SendMessage (immediate)",
        "before": "door, --before checkout",
        "hosted": "door as the capsule host serves",
        "bare": "bare aiohttp JSON handler",
        "orjson": "bare handler, orjson (info)",
        "sdk-py": "official Python SDK server",
        "sdk-js": "official JS SDK server",
    }
    for name in servers:
        r = median_by(runs[name], "rps")
        c = statistics.median(cpu[name])
        print(
            f"{labels[name]:29}: {r.rps:9.0f} req/s  p50 {r.p50_ms:6.2f} ms  p99 {r.p99_ms:6.2f} ms  non-2xx {r.non2xx}"
            f"  cpu {c:6.1f} us/req  (ratio rps {r.rps / bare.rps:4.2f}, cpu bare/this {bare_cpu / c:4.2f})"
        )
    per_round = [d.rps / b.rps for d, b in zip(runs["door"], runs["bare"], strict=True)]
    cpu_round = [b / d for d, b in zip(cpu["door"], cpu["bare"], strict=True)]
    ratio = median_by(runs["door"], "rps").rps / bare.rps
    paired = statistics.median(per_round)
    print(f"ratio door/bare per round    : {[round(x, 2) for x in per_round]}")
    print(f"cpu bare/door per round      : {[round(x, 2) for x in cpu_round]}")
    hosted_round = [b / d for d, b in zip(cpu["hosted"], cpu["bare"], strict=True)]
    print(
        f"cpu bare/hosted per round    : {[round(x, 2) for x in hosted_round]}  median"
        f" {statistics.median(hosted_round):.2f} (the door behind the capsule host's guard)"
    )
    print(f"ratio door/bare              : {ratio:6.2f}  (of the medians)")
    print(f"ratio door/bare, paired      : {paired:6.2f}  (median of the rounds' ratios)")
    verdict = "met" if min(ratio, paired) >= 0.7 else "met by the medians only" if ratio >= 0.7 else "NOT met"
    print(f"target door >= 0.7x bare     : {verdict}")
    verdict = (
        "met" if min(statistics.median(cpu_round), bare_cpu / statistics.median(cpu["door"])) >= 0.75 else "NOT met"
    )
    print(f"target cpu bare/door >= 0.75 : {verdict}")
    orj = median_by(runs["orjson"], "rps")
    print(f"ratio door/orjson (info)     : {median_by(runs['door'], 'rps').rps / orj.rps:6.2f}")
    sdks = [n for n in ("sdk-py", "sdk-js") if n in runs]
    if sdks:
        fastest = max(sdks, key=lambda n: median_by(runs[n], "rps").rps)
        over = median_by(runs["door"], "rps").rps / median_by(runs[fastest], "rps").rps
        paired_sdk = statistics.median(d.rps / f.rps for d, f in zip(runs["door"], runs[fastest], strict=True))
        per_sdk = [round(d.rps / f.rps, 2) for d, f in zip(runs["door"], runs[fastest], strict=True)]
        print(f"ratio door/{fastest} per round: {per_sdk}")
        print(f"ratio door/{fastest}        : {over:6.2f} (medians), {paired_sdk:6.2f} (paired)")
        print(f"target door >= 3x faster SDK : {'met' if min(over, paired_sdk) >= 3 else 'NOT met'}")
    print("RSS after the rounds (MiB)   : " + "  ".join(f"{n} {v:.0f}" for n, v in rss.items()))
    if rss_points:
        print("door RSS over more requests  : " + "  ".join(f"{n:,}: {v:.1f} MiB" for n, v in rss_points))
        tail = [v for _, v in rss_points[len(rss_points) // 2 :]]
        growth = (max(tail) - min(tail)) / min(tail)
        print(f"door RSS, second half        : within {growth:.1%} ({'flat' if growth < 0.05 else 'NOT flat'})")


if __name__ == "__main__":
    main()

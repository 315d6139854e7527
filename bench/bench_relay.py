"""Relay overhead: client → roost ``POST /a2a/send`` → door, against the same two hops without roost.

Same run, same door: a real ``a2a.door.Door`` (instant runner) registered with the daemon as a
session's door, so the relay seals every send to it (HMAC over the stamp and a sha256 over the
message) and the door verifies the seal: the seal's cost on both sides is in the measured path.
The bench checks it is: a relayed task is invisible to an unsealed caller (it belongs to the
sending session). wrk runs one connection (-c1), so p50 is the round-trip latency of one request
at a time. Every relayed send is the full path: credential verified, network.allow checked
(given and dialled URL), the card's interface used, traceparent/trust stamped and sealed, the
peer's Task parsed, ``a2a_send`` appended to the sender's trace.jsonl before the answer.

The baseline ("floor") is a bare aiohttp forwarding proxy: a handler that forwards the JSON-RPC
body to the door with an ``aiohttp.ClientSession`` and returns the answer unread (no auth, no
parsing, no trace). A relayed send is two hops, so the floor, not the direct call, is the
baseline. Target: p50(relay) / p50(floor) <= 1.25. Three more servers split the difference: the
floor forwarding through roost's own transport (``a2a.http1.Http1Pool``, which the relay uses and
which costs less than ``ClientSession``), so the report shows how much of the gap that closes;
the floor plus the ordering guarantee (the ``a2a_send`` line appended through roost's executor
hop before answering), so it separates what the guarantee costs from the relay's work; and
roost's transport plus the guarantee, the like-for-like floor: the relay minus it is roost's own
work per send.

Cores (2 on the reference box), ``--layout``: ``shared`` (the default) runs every server on
core 0 and wrk on core 1; ``split`` moves the door to core 1 beside wrk, so each front hop
crosses cores; ``none`` pins only wrk. Every layout gives the floor and the relay the same
topology (front server, then door). On the reference box (a 2-vCPU VM) ``split`` inflated the
floor most: its p50 was 1.2 to 2.0 ms against 1.0 to 1.3 ms shared, because a core that idles
while the other one works wakes slowly; ``none`` was close to ``shared`` but noisier (migrations).
So ``shared`` is the baseline least inflated here; the relay gets no help from it, as its own
work adds to the same core's queue. The order of the paths rotates every round so a noisy
neighbour hits them alike, and the floor and the relay always run side by side. Two ratios are
reported: of the medians, and paired (the median of each round's own ratio). This VM's speed
drifts over seconds (a path's p50 moves by a half between rounds a minute apart) and rounds next
to each other drift together, so many short rounds pair better than a few long ones. The target
counts as met only when both ratios meet it. Every round's p50 and the front server's CPU per
request (from /proc) are printed too.

``--before PATH`` adds a path: a second daemon imported from another checkout (e.g. a ``git
worktree`` of the previous commit), holding the same key and so sealing to the same door, so a
change to the relay is measured before/after in the same run; it runs beside the floor and the
relay.

``--instructions`` counts instead of timing: each front server (the floor, the pooled floor, the
pooled floor with the guarantee, roost, and ``--before``) runs under valgrind's callgrind and
forwards ``--small`` and then, in a second process, ``--large`` sends one at a time over one
kept-alive connection; the difference of the two totals over the difference of the counts is
what one send costs that process (start-up, registration and shutdown cancel out). It counts
work, not waiting: the executor hop's thread switches cost time the count does not show.

``--instructions --streamed`` counts the streamed send instead (``Accept: text/event-stream``) and
its floor (the bare proxy passing the door's SSE answer on chunk by chunk, with the same
``a2a_send`` hop when the Task arrives).

Run: python bench/bench_relay.py [--seconds 1] [--rounds 20] [--layout shared|split|none] [--before PATH]
     python bench/bench_relay.py --instructions [--streamed] [--small 200] [--large 1000] [--before PATH]
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import urllib.error
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (
    Proc,
    WrkResult,
    app_script,
    callgrind_totals,
    make_registry,
    median_by,
    post_json,
    start_daemon,
    start_script,
    taskset,
    wrk,
)
from bench_door import cpu_secs

FRONT_CPU = "0"
DOOR_SESSION = "ses_bench_door"

# A registered session's door: it learns its seal key (the /register answer's door_key) on stdin
# after it printed its port, and says "sealed" once the key is installed.
DOOR_SERVER = app_script(
    f"""
    import asyncio, sys, threading
    from a2a.door import Door, TaskOutcome

    async def runner(task):
        return TaskOutcome.completed("ok")

    DOOR = Door(name="bench", version="0.1.0", session_id={DOOR_SESSION!r}, runner=runner,
                queue_depth=10000, peer_tasks_accept=True)

    def build_handler():  # as the capsule host serves it (a checkout before Door.handle: its app)
        return getattr(DOOR, "handle", None)

    def build_app():
        return DOOR.app

    def on_port(port):
        loop = asyncio.get_running_loop()

        def read_key():
            key = bytes.fromhex(sys.stdin.readline().strip())

            def install():
                DOOR.seal_key = key
                print("sealed", flush=True)

            loop.call_soon_threadsafe(install)

        threading.Thread(target=read_key, daemon=True).start()
    """
)


def start_door(cpu: str | None) -> Proc:
    cmd = [*(taskset(cpu) if cpu else []), sys.executable, "-c", DOOR_SERVER]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    return Proc(proc, int(proc.stdout.readline().decode().strip()))


def seal_door(door: Proc, key_hex: str) -> None:
    assert door.proc.stdin is not None and door.proc.stdout is not None
    door.proc.stdin.write(key_hex.encode() + b"\n")
    door.proc.stdin.flush()
    if door.proc.stdout.readline().strip() != b"sealed":
        raise SystemExit("the bench door did not install its seal key")


def relay_target(daemon: Proc, door: Proc, workdir: Path, sealed: str | None = None) -> tuple[str, dict[str, str], str]:
    """Register ``door`` as the receiving session's door with ``daemon`` and a sender whose trace
    lives in ``workdir``; the relay's request body and headers for that sender, and the door's key.
    The door is sealed with the key unless it already is (``sealed``: a daemon with the same key)."""
    workdir.mkdir()
    (workdir / "door").mkdir()
    registered = post_json(
        daemon.url + "/register",
        {
            "session_id": DOOR_SESSION,
            "name": "receiver",
            "version": "0.1.0",
            "workdir": str(workdir / "door"),
            "capsule_url": door.url,
        },
    )
    key: str = registered["door_key"]
    if sealed is None:
        seal_door(door, key)
    elif key != sealed:
        raise SystemExit("the --before daemon does not hold the same key: it cannot seal to the shared door")
    cred = post_json(
        daemon.url + "/register",
        {"session_id": "ses_bench", "name": "sender", "version": "0.1.0", "workdir": str(workdir)},
    )["credential"]
    body = json.dumps({"peer_url": door.url, "text": "hello", "message_id": "msg-" + COUNTER})
    probe = post_json(
        daemon.url + "/a2a/send", json.loads(body.replace(COUNTER, "probe")), {"x-murmur-spawn-credential": cred}
    )
    if unsealed_sees(door.url, probe["task_id"]):
        raise SystemExit("the relay's send reached the door unsealed: the seal is not being measured")
    return body, {"content-type": "application/json", "x-murmur-spawn-credential": cred}, key


def unsealed_sees(door_url: str, task_id: str) -> bool:
    """Whether a direct, unsealed GetTask finds the task (it must not: it is the session's)."""
    body = {"jsonrpc": "2.0", "id": "g", "method": "GetTask", "params": {"id": task_id}}
    answer = post_json(door_url + "/", body, {"A2A-Version": "1.0"})
    return "result" in answer


def proxy_server(door_url: str) -> str:
    return app_script(
        f"""
        import aiohttp
        from aiohttp import web

        DOOR = {door_url + "/"!r}
        HEADERS = {DIRECT_HEADERS!r}

        async def forward(request):
            body = await request.read()
            async with request.app["client"].post(DOOR, data=body, headers=HEADERS) as resp:
                data = await resp.read()
            return web.Response(body=data, content_type="application/json")

        async def open_client(app):
            app["client"] = aiohttp.ClientSession()

        def build_app():
            app = web.Application()
            app.router.add_post("/", forward)
            app.on_startup.append(open_client)
            return app
        """
    )


def pool_proxy_server(door_url: str) -> str:
    """The floor with roost's transport: the same bare forward, through ``a2a.http1.Http1Pool``."""
    return app_script(
        f"""
        from aiohttp import web
        from yarl import URL

        from a2a.http1 import Http1Pool

        DOOR = URL({door_url + "/"!r})
        HEADERS = {DIRECT_HEADERS!r}
        POOL = Http1Pool(connect_timeout=5.0, total_timeout=30.0)

        async def forward(request):
            body = await request.read()
            _, data, _ = await POOL("POST", DOOR, body, HEADERS)
            return web.Response(body=data, content_type="application/json")

        def build_app():
            app = web.Application()
            app.router.add_post("/", forward)
            return app
        """
    )


def _traced_app(door_url: str, headers: dict[str, str], forward: str) -> str:
    """A floor server with the ordering guarantee: ``forward`` (the handler's source) forwards with an
    ``aiohttp.ClientSession`` and appends the ``a2a_send`` line through roost's executor hop and
    trace writer (``line(task)`` builds it)."""
    return app_script(
        f"""
        import json
        import tempfile

        import aiohttp
        from aiohttp import web

        from roost.system.blocking import BlockingExecutor
        from roost.observe.tracelines import TraceWriter

        DOOR = {door_url + "/"!r}
        HEADERS = {headers!r}
        EXECUTOR = BlockingExecutor()
        WRITER = TraceWriter(tempfile.mkdtemp(prefix="roost-bench-floor-"), "ses_floor")

        def line(task):
            return {{"peer_url": DOOR, "message_id": "msg-1", "task_id": task["id"],
                     "context_id": task["contextId"], "traceparent": None, "trust": "trusted"}}
{textwrap.indent(textwrap.dedent(forward), " " * 8)}
        async def open_client(app):
            app["client"] = aiohttp.ClientSession()

        def build_app():
            app = web.Application()
            app.router.add_post("/", forward)
            app.on_startup.append(open_client)
            return app
        """
    )


def traced_proxy_server(door_url: str) -> str:
    """The floor plus the ordering guarantee: the same forward, then the peer's task ids appended
    as an ``a2a_send`` line through roost's own executor hop and trace writer before answering."""
    return _traced_app(
        door_url,
        DIRECT_HEADERS,
        """
        async def forward(request):
            body = await request.read()
            async with request.app["client"].post(DOOR, data=body, headers=HEADERS) as resp:
                data = await resp.read()
            await EXECUTOR.run(WRITER.write, "a2a_send", line(json.loads(data)["result"]["task"]))
            return web.Response(body=data, content_type="application/json")
        """,
    )


def traced_stream_proxy_server(door_url: str) -> str:
    """The streamed floor: the same bare forward of a ``SendStreamingMessage``, its SSE answer passed
    on chunk by chunk as it comes, and the ``a2a_send`` line written through the executor hop when
    the peer's Task (the stream's first event) arrives, as the relay's streamed send does."""
    return _traced_app(
        door_url,
        STREAM_DIRECT_HEADERS,
        """
        async def forward(request):
            body = await request.read()
            out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await out.prepare(request)
            seen = False
            try:
                async with request.app["client"].post(DOOR, data=body, headers=HEADERS) as resp:
                    async for chunk in resp.content.iter_any():
                        if not seen:
                            task = json.loads(chunk.split(b"\\n", 1)[0][5:])["result"]["task"]
                            await EXECUTOR.run(WRITER.write, "a2a_send", line(task))
                            seen = True
                        await out.write(chunk)
                await out.write_eof()
            except ConnectionResetError:  # wrk closed its connection at the round's end, as the relay allows
                pass
            return out
        """,
    )


def traced_pool_proxy_server(door_url: str) -> str:
    """Roost's transport plus the ordering guarantee: the pooled forward, then the same ``a2a_send``
    line through the same executor hop. The relay minus this is roost's own work per send."""
    return app_script(
        f"""
        import json
        import tempfile

        from aiohttp import web
        from yarl import URL

        from a2a.http1 import Http1Pool
        from roost.system.blocking import BlockingExecutor
        from roost.observe.tracelines import TraceWriter

        DOOR = URL({door_url + "/"!r})
        HEADERS = {DIRECT_HEADERS!r}
        POOL = Http1Pool(connect_timeout=5.0, total_timeout=30.0)
        EXECUTOR = BlockingExecutor()
        WRITER = TraceWriter(tempfile.mkdtemp(prefix="roost-bench-pooled-"), "ses_pooled")

        async def forward(request):
            body = await request.read()
            _, data, _ = await POOL("POST", DOOR, body, HEADERS)
            task = json.loads(data)["result"]["task"]
            line = {{"peer_url": {door_url!r}, "message_id": "msg-1", "task_id": task["id"],
                     "context_id": task["contextId"], "traceparent": None, "trust": "trusted"}}
            await EXECUTOR.run(WRITER.write, "a2a_send", line)
            return web.Response(body=data, content_type="application/json")

        def build_app():
            app = web.Application()
            app.router.add_post("/", forward)
            return app
        """
    )


COUNTER = "@N@"  # wrk replaces it per request: every send carries a message id of its own

DIRECT_HEADERS = {
    "content-type": "application/json",
    "A2A-Version": "1.0",
    "x-murmur-task-origin": "peer",
    "x-murmur-task-trust": "trusted",
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}
STREAM_DIRECT_HEADERS = {**DIRECT_HEADERS, "Accept": "text/event-stream"}
STREAM_DIRECT_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "req_1",
        "method": "SendStreamingMessage",
        "params": {"message": {"messageId": "msg-" + COUNTER, "role": "ROLE_USER", "parts": [{"text": "hello"}]}},
    }
)
DIRECT_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "req_1",
        "method": "SendMessage",
        "params": {
            "message": {"messageId": "msg-" + COUNTER, "role": "ROLE_USER", "parts": [{"text": "hello"}]},
            "configuration": {"returnImmediately": True},
        },
    }
)


def fresh(body: str) -> str:
    """``body`` whose message ids are this wrk run's own (wrk numbers requests from 1 every run):
    every send is a new message, as a repeated id from the same sender is answered as a retry."""
    return body.replace(COUNTER, f"{uuid.uuid4().hex[:12]}-{COUNTER}")


def round_order(names: list[str], r: int) -> list[str]:
    """Round ``r``'s order: the paths rotated, the floor and the relay (and ``before``) always next
    to each other (which goes first alternates), so the ones compared drift together."""
    pair = ["floor", "roost", *(["before"] if "before" in names else [])]
    if r % 2:
        pair.reverse()
    units = [pair] + [[n] for n in names if n not in pair]
    k = r % len(units)
    return [n for unit in units[k:] + units[:k] for n in unit]


def paired_ratio(runs: dict[str, list[WrkResult]], num: str, den: str) -> float:
    """The median over rounds of ``num``'s p50 over ``den``'s p50 in the same round."""
    return statistics.median(x.p50_ms / y.p50_ms for x, y in zip(runs[num], runs[den], strict=True))


def _send_all(port: int, path: str, body: str, headers: dict[str, str], n: int) -> None:
    """``n`` sends, one at a time on one kept-alive connection, each a new message; all must be 200."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    tag = uuid.uuid4().hex[:12]
    try:
        for i in range(n):
            conn.request("POST", path, body.replace(COUNTER, f"{tag}-{i}").encode(), headers)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise SystemExit(f"a send under callgrind failed: {resp.status} {data[:300]!r}")
    finally:
        conn.close()


def _finish(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=600)  # valgrind writes its totals as the process exits
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def callgrind_sends(name: str, tmp: Path, registry: Path, n: int, tree: str | None) -> int:
    """The instructions the front server of path ``name`` executes from start to end, forwarding
    ``n`` sends to a door of its own (the door itself is not counted)."""
    run = tmp / f"{name}-{n}"
    run.mkdir()
    out = run / "callgrind.out"
    grind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    door = start_door(None)
    try:
        streamed = name.endswith("-s")
        if name in ("roost", "before", "roost-s", "before-s"):
            daemon_args = ["--registry-path", str(registry), "--state-dir", str(run / "state")]
            daemon_args += ["--spawn-allow", "sender", "--spawn-allow", "receiver"]
            daemon = start_daemon(daemon_args, cpu="0-1", prefix=grind, timeout=600, tree=tree)
            try:
                body, headers, _ = relay_target(daemon, door, run / "work")
                if streamed:
                    headers = {**headers, "Accept": "text/event-stream"}
                _send_all(daemon.port, "/a2a/send", body, headers, n)
            finally:
                _finish(daemon.proc)
        else:
            code = {
                "floor": proxy_server,
                "traced": traced_proxy_server,
                "pooled": pool_proxy_server,
                "pooled+g": traced_pool_proxy_server,
                "traced-s": traced_stream_proxy_server,
            }[name]
            proc = subprocess.Popen(
                [*grind, sys.executable, "-c", code(door.url)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
            )
            assert proc.stdout is not None
            try:
                port = int(proc.stdout.readline().decode().strip())
                if streamed:
                    _send_all(port, "/", STREAM_DIRECT_BODY, STREAM_DIRECT_HEADERS, n)
                else:
                    _send_all(port, "/", DIRECT_BODY, DIRECT_HEADERS, n)
            finally:
                _finish(proc)
    finally:
        door.stop()
    return callgrind_totals(out)


def instructions(before: str | None, small: int, large: int, streamed: bool = False) -> None:
    """Instructions per send of each front server, by callgrind (see the module's docstring)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    if large <= small:
        raise SystemExit("--large must be more sends than --small")
    names = ["floor", "traced", "pooled", "pooled+g", "roost", *(["before"] if before else [])]
    if streamed:
        names = ["traced-s", "roost-s", *(["before-s"] if before else [])]
    per: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        registry = Path(tmp) / "registry"
        allow = {"capabilities": {"network": {"allow": ["127.0.0.1"]}}}
        make_registry(registry, {"sender": allow, "receiver": allow})
        for name in names:
            low, high = (
                callgrind_sends(name, Path(tmp), registry, n, before if name.startswith("before") else None)
                for n in (small, large)
            )
            per[name] = (high - low) / (large - small)
            print(f"  {name:8}: {low:,} instructions for {small} sends, {high:,} for {large}", flush=True)
    if streamed:
        for name in names:
            print(f"{name:8} : {per[name] / 1000:7.1f}k instructions/streamed send")
        ratio = per["roost-s"] / per["traced-s"]
        print(
            f"streamed relay/(streamed bare proxy + a2a_send hop), instructions: {ratio:5.2f}  (target <= 1.25: "
            f"{'met' if ratio <= 1.25 else 'NOT met'})"
        )
        if before:
            print(f"this/before (instructions, streamed): {per['roost-s'] / per['before-s']:5.3f}")
        return
    for name in names:
        print(f"{name:8} : {per[name] / 1000:7.1f}k instructions/send  (this/floor {per[name] / per['floor']:4.2f})")
    restated = per["roost"] / per["traced"]
    print(
        f"relay/(bare proxy + a2a_send hop), instructions: {restated:5.2f}  (target <= 1.25: "
        f"{'met' if restated <= 1.25 else 'NOT met'}); relay/bare proxy {per['roost'] / per['floor']:5.2f}"
    )
    own = per["roost"] - per["pooled+g"]
    print(
        f"roost's own work: {own / 1000:.1f}k instructions/send over the pooled floor with the guarantee"
        f" ({own / per['roost']:.0%} of roost's)"
    )
    if before:
        print(f"this/before (instructions): {per['roost'] / per['before']:5.3f}")


def _verdict(ratio: float, paired: float) -> str:
    return "met" if max(ratio, paired) <= 1.25 else "one ratio only" if min(ratio, paired) <= 1.25 else "NOT met"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--connections", type=int, default=1)
    ap.add_argument("--layout", choices=("shared", "split", "none"), default="shared")
    ap.add_argument("--before", help="another checkout whose relay is measured in the same run")
    ap.add_argument("--instructions", action="store_true", help="instructions per send, counted by callgrind")
    ap.add_argument("--small", type=int, default=200, help="--instructions: sends in the first count")
    ap.add_argument("--large", type=int, default=1000, help="--instructions: sends in the second count")
    ap.add_argument("--streamed", action="store_true", help="--instructions: the streamed send and its floor")
    args = ap.parse_args()
    if args.instructions:
        instructions(args.before, args.small, args.large, args.streamed)
        return
    front: str | None = None if args.layout == "none" else FRONT_CPU
    door_cpu: str | None = {"split": "1", "shared": FRONT_CPU, "none": None}[args.layout]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "registry"
        allow = {"capabilities": {"network": {"allow": ["127.0.0.1"]}}}
        make_registry(root, {"sender": allow, "receiver": allow})
        daemon_args = ["--registry-path", str(root), "--spawn-allow", "sender", "--spawn-allow", "receiver"]
        front_cpu = front or "0-1"
        daemon = start_daemon([*daemon_args, "--state-dir", str(Path(tmp) / "state")], cpu=front_cpu)
        door = start_door(door_cpu)
        before: Proc | None = None
        if args.before:
            # The same key as the daemon's, so it seals to the same door: a door of its own would
            # be colder than the one every other path keeps busy, which likely favours this checkout.
            state = Path(tmp) / "state-before"
            state.mkdir(mode=0o700)
            shutil.copy2(Path(tmp) / "state" / "master.key", state / "master.key")
            before = start_daemon([*daemon_args, "--state-dir", str(state)], cpu=front_cpu, tree=args.before)
        proxy = start_script(proxy_server(door.url), cpu=front or "0-1")
        pooled = start_script(pool_proxy_server(door.url), cpu=front or "0-1")
        traced = start_script(traced_proxy_server(door.url), cpu=front or "0-1")
        traced_pool = start_script(traced_pool_proxy_server(door.url), cpu=front or "0-1")
        streamed = start_script(traced_stream_proxy_server(door.url), cpu=front or "0-1")
        try:
            workdir = Path(tmp) / "work"
            relay_body, relay_hdr, door_key = relay_target(daemon, door, workdir)
            direct_body = DIRECT_BODY
            targets = {
                "direct": (door.url + "/", direct_body, DIRECT_HEADERS),
                "floor": (proxy.url + "/", direct_body, DIRECT_HEADERS),
                "pooled": (pooled.url + "/", direct_body, DIRECT_HEADERS),
                "traced": (traced.url + "/", direct_body, DIRECT_HEADERS),
                "pooled+g": (traced_pool.url + "/", direct_body, DIRECT_HEADERS),
                "roost": (daemon.url + "/a2a/send", relay_body, relay_hdr),
                "traced-s": (streamed.url + "/", STREAM_DIRECT_BODY, STREAM_DIRECT_HEADERS),
                "roost-s": (daemon.url + "/a2a/send", relay_body, {**relay_hdr, "Accept": "text/event-stream"}),
            }
            fronts = {
                "direct": door,
                "floor": proxy,
                "pooled": pooled,
                "traced": traced,
                "pooled+g": traced_pool,
                "roost": daemon,
                "traced-s": streamed,
                "roost-s": daemon,
            }
            if before is not None:
                before_body, before_hdr, _ = relay_target(before, door, Path(tmp) / "work-before", sealed=door_key)
                targets["before"] = (before.url + "/a2a/send", before_body, before_hdr)
                fronts["before"] = before
            for url, body, hdr in targets.values():  # warm-up
                wrk(
                    url,
                    method="POST",
                    body=fresh(body),
                    headers=hdr,
                    seconds=2,
                    connections=args.connections,
                    counter=COUNTER,
                )
            runs: dict[str, list[WrkResult]] = {name: [] for name in targets}
            cpu: dict[str, list[float]] = {name: [] for name in targets}
            names = list(targets)
            for r in range(args.rounds):
                for name in round_order(names, r):
                    url, body, hdr = targets[name]
                    c0 = cpu_secs(fronts[name].proc.pid)
                    res = wrk(
                        url,
                        method="POST",
                        body=fresh(body),
                        headers=hdr,
                        seconds=args.seconds,
                        connections=args.connections,
                        counter=COUNTER,
                    )
                    runs[name].append(res)
                    cpu[name].append((cpu_secs(fronts[name].proc.pid) - c0) / max(1.0, res.rps * args.seconds) * 1e6)
            lines = len((workdir / ".murmur" / "ses_bench" / "trace.jsonl").read_text().splitlines())
        except urllib.error.HTTPError as exc:
            raise SystemExit(f"bench setup failed: {exc.code} {exc.read()[:300]!r}") from None
        finally:
            daemon.stop()
            door.stop()
            proxy.stop()
            pooled.stop()
            traced.stop()
            traced_pool.stop()
            streamed.stop()
            if before is not None:
                before.stop()
    d, f, t, r = (median_by(runs[name], "p50_ms") for name in ("direct", "floor", "traced", "roost"))
    pf = median_by(runs["pooled"], "p50_ms")
    pg = median_by(runs["pooled+g"], "p50_ms")
    print(f"layout {args.layout}, {args.rounds} rounds of {args.seconds} s, order rotated; sends sealed and verified")
    print(f"client -> door                 : p50 {d.p50_ms:6.3f} ms  p99 {d.p99_ms:6.3f} ms  {d.rps:7.0f} req/s")
    print(f"client -> bare aiohttp proxy   : p50 {f.p50_ms:6.3f} ms  p99 {f.p99_ms:6.3f} ms  {f.rps:7.0f} req/s")
    print(f"  ... forwarding via Http1Pool : p50 {pf.p50_ms:6.3f} ms  p99 {pf.p99_ms:6.3f} ms  {pf.rps:7.0f} req/s")
    print(f"  ... + a2a_send via executor  : p50 {t.p50_ms:6.3f} ms  p99 {t.p99_ms:6.3f} ms  {t.rps:7.0f} req/s")
    print(f"  ... Http1Pool + a2a_send     : p50 {pg.p50_ms:6.3f} ms  p99 {pg.p99_ms:6.3f} ms  {pg.rps:7.0f} req/s")
    print(
        f"client -> roost -> door        : p50 {r.p50_ms:6.3f} ms  p99 {r.p99_ms:6.3f} ms  {r.rps:7.0f} req/s"
        f"  non-2xx {sum(x.non2xx for x in runs['roost'])}  a2a_send lines {lines}"
    )
    ratio = r.p50_ms / f.p50_ms
    per_round = sorted(x.p50_ms / y.p50_ms for x, y in zip(runs["roost"], runs["floor"], strict=True))
    paired = paired_ratio(runs, "roost", "floor")
    quart = f"{per_round[len(per_round) // 4]:.2f}-{per_round[(3 * len(per_round)) // 4]:.2f}"
    print(f"p50 ratio relay/direct         : {r.p50_ms / d.p50_ms:6.2f}")
    print(f"p50 ratio floor/direct         : {f.p50_ms / d.p50_ms:6.2f}  (through aiohttp's server and client)")
    print(f"p50 ratio relay/floor          : {ratio:6.2f}  (of the medians)")
    print(f"p50 ratio relay/floor, paired  : {paired:6.2f}  (median of the rounds' ratios; quartiles {quart})")
    print(f"(old) relay <= 1.25x bare floor: {_verdict(ratio, paired)}")
    hop = t.p50_ms - f.p50_ms
    print(
        f"the ordering guarantee alone   : +{hop:.3f} ms = {hop / f.p50_ms:.2f}x the floor"
        f" (floor+guarantee/floor {t.p50_ms / f.p50_ms:.2f}); relay's other work +{r.p50_ms - t.p50_ms:.3f} ms"
    )
    restated = r.p50_ms / t.p50_ms
    restated_paired = paired_ratio(runs, "roost", "traced")
    rg = sorted(x.p50_ms / y.p50_ms for x, y in zip(runs["roost"], runs["traced"], strict=True))
    print(
        f"p50 ratio relay/floor+guarantee: {restated:6.2f} (medians), {restated_paired:6.2f} (paired);"
        f" per round {[round(x, 2) for x in rg]}"
    )
    print(f"target relay <= 1.25x (bare proxy + the same a2a_send executor hop): {_verdict(restated, restated_paired)}")
    rs, ts = median_by(runs["roost-s"], "p50_ms"), median_by(runs["traced-s"], "p50_ms")
    s_paired = paired_ratio(runs, "roost-s", "traced-s")
    print(
        f"streamed: relay p50 {rs.p50_ms:6.3f} ms p99 {rs.p99_ms:6.3f} ms; floor+guarantee p50 {ts.p50_ms:6.3f} ms"
        f" p99 {ts.p99_ms:6.3f} ms; ratio {rs.p50_ms / ts.p50_ms:5.2f} (medians), {s_paired:5.2f} (paired)"
    )
    print(f"target streamed relay <= 1.25x streamed floor+guarantee: {_verdict(rs.p50_ms / ts.p50_ms, s_paired)}")
    print(
        f"paired: floor+guarantee/floor {paired_ratio(runs, 'traced', 'floor'):.2f},"
        f" relay/floor+guarantee {paired_ratio(runs, 'roost', 'traced'):.2f},"
        f" relay/pooled floor {paired_ratio(runs, 'roost', 'pooled'):.2f},"
        f" relay/(pooled floor+guarantee) {paired_ratio(runs, 'roost', 'pooled+g'):.2f}"
    )
    print(
        f"roost's own work per send      : +{r.p50_ms - pg.p50_ms:.3f} ms over the pooled floor with the guarantee"
        f" (the target leaves {1.25 * f.p50_ms - pg.p50_ms:+.3f} ms for it)"
    )
    print(
        f"p50 ratio relay/pooled floor   : {r.p50_ms / pf.p50_ms:6.2f}  (the same forward through roost's transport;"
        f" roost's work and the guarantee +{r.p50_ms - pf.p50_ms:.3f} ms)"
    )
    if "before" in runs:
        b = median_by(runs["before"], "p50_ms")
        print(
            f"client -> roost (--before)     : p50 {b.p50_ms:6.3f} ms  p99 {b.p99_ms:6.3f} ms  {b.rps:7.0f} req/s;"
            f" this/before {r.p50_ms / b.p50_ms:.3f}, paired {paired_ratio(runs, 'roost', 'before'):.3f};"
            f" before/floor {b.p50_ms / f.p50_ms:.2f}, paired {paired_ratio(runs, 'before', 'floor'):.2f}"
        )
    print(
        "front process CPU per request (µs, median): "
        + "  ".join(f"{n} {sorted(cpu[n])[(len(cpu[n]) - 1) // 2]:.0f}" for n in names)
    )
    print("per round p50 ms: " + "  ".join(f"{n} " + ",".join(f"{x.p50_ms:.3f}" for x in runs[n]) for n in names))


if __name__ == "__main__":
    main()

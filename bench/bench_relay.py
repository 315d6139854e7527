"""Relay overhead: client → roost ``POST /a2a/send`` → door, against client → door directly.

Same run, same door: a real ``a2a.door.Door`` (instant runner) on core 0 next to the daemon,
wrk on the other core with one connection (-c1), so p50 is the round-trip latency of one
request at a time. Every relayed send is the full path: credential verified, network.allow
checked (given and dialled URL), the card's interface used, traceparent/trust stamped, the
peer's Task parsed, ``a2a_send`` appended to the sender's trace.jsonl before the answer.

A third server gives the floor: the least any relay built on aiohttp can cost, a handler that
forwards the JSON-RPC body to the door with an ``aiohttp.ClientSession`` and returns the answer
unread (no auth, no parsing, no trace). A relayed send is two hops, so the floor — not the
direct call — is the baseline. Target: p50(relay) / p50(floor) <= 1.25. A fourth server is the
floor plus the ordering guarantee (the ``a2a_send`` line appended through roost's executor hop
before answering), so the report separates what the guarantee costs from the relay's own work.
Rounds alternate the four so a noisy neighbour hits them alike; the medians are reported.

Run: python bench/bench_relay.py [--seconds 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import WrkResult, app_script, make_registry, median_by, post_json, start_daemon, start_script, wrk
from bench_door import DOOR_SERVER


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


def traced_proxy_server(door_url: str) -> str:
    """The floor plus the ordering guarantee: the same forward, then the peer's task ids appended
    as an ``a2a_send`` line through roost's own executor hop and trace writer before answering."""
    return app_script(
        f"""
        import json
        import tempfile

        import aiohttp
        from aiohttp import web

        from roost.blocking import BlockingExecutor
        from roost.trace import TraceWriter

        DOOR = {door_url + "/"!r}
        HEADERS = {DIRECT_HEADERS!r}
        EXECUTOR = BlockingExecutor()
        WRITER = TraceWriter(tempfile.mkdtemp(prefix="roost-bench-floor-"), "ses_floor")

        async def forward(request):
            body = await request.read()
            async with request.app["client"].post(DOOR, data=body, headers=HEADERS) as resp:
                data = await resp.read()
            task = json.loads(data)["result"]["task"]
            line = {{"peer_url": DOOR, "message_id": "msg-1", "task_id": task["id"],
                     "context_id": task["contextId"], "traceparent": None, "trust": "trusted"}}
            await EXECUTOR.run(WRITER.write, "a2a_send", line)
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


DIRECT_HEADERS = {
    "content-type": "application/json",
    "A2A-Version": "1.0",
    "x-murmur-task-origin": "peer",
    "x-murmur-task-trust": "trusted",
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}
DIRECT_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "req_1",
        "method": "SendMessage",
        "params": {
            "message": {"messageId": "msg-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]},
            "configuration": {"returnImmediately": True},
        },
    }
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "registry"
        make_registry(root, {"sender": {"capabilities": {"network": {"allow": ["127.0.0.1"]}}}})
        workdir = Path(tmp) / "work"
        workdir.mkdir()
        daemon = start_daemon(
            ["--registry-path", str(root), "--state-dir", str(Path(tmp) / "state"), "--spawn-allow", "sender"]
        )
        door = start_script(DOOR_SERVER)
        proxy = start_script(proxy_server(door.url))
        traced = start_script(traced_proxy_server(door.url))
        try:
            cred = post_json(
                daemon.url + "/register",
                {"session_id": "ses_bench", "name": "sender", "version": "0.1.0", "workdir": str(workdir)},
            )["credential"]
            relay_body = json.dumps({"peer_url": door.url, "text": "hello", "message_id": "msg-1"})
            relay_hdr = {"content-type": "application/json", "x-murmur-spawn-credential": cred}
            targets = {
                "direct": (door.url + "/", DIRECT_BODY, DIRECT_HEADERS),
                "floor": (proxy.url + "/", DIRECT_BODY, DIRECT_HEADERS),
                "traced": (traced.url + "/", DIRECT_BODY, DIRECT_HEADERS),
                "roost": (daemon.url + "/a2a/send", relay_body, relay_hdr),
            }
            for url, body, hdr in targets.values():  # warm-up
                wrk(url, method="POST", body=body, headers=hdr, seconds=2, connections=args.connections)
            runs: dict[str, list[WrkResult]] = {name: [] for name in targets}
            for _ in range(args.rounds):
                for name, (url, body, hdr) in targets.items():
                    runs[name].append(
                        wrk(
                            url,
                            method="POST",
                            body=body,
                            headers=hdr,
                            seconds=args.seconds,
                            connections=args.connections,
                        )
                    )
            lines = len((workdir / ".murmur" / "ses_bench" / "trace.jsonl").read_text().splitlines())
        finally:
            daemon.stop()
            door.stop()
            proxy.stop()
            traced.stop()
    d, f, t, r = (median_by(runs[name], "p50_ms") for name in ("direct", "floor", "traced", "roost"))
    print(f"client -> door                 : p50 {d.p50_ms:6.3f} ms  p99 {d.p99_ms:6.3f} ms  {d.rps:7.0f} req/s")
    print(f"client -> bare aiohttp proxy   : p50 {f.p50_ms:6.3f} ms  p99 {f.p99_ms:6.3f} ms  {f.rps:7.0f} req/s")
    print(f"  ... + a2a_send via executor  : p50 {t.p50_ms:6.3f} ms  p99 {t.p99_ms:6.3f} ms  {t.rps:7.0f} req/s")
    print(
        f"client -> roost -> door        : p50 {r.p50_ms:6.3f} ms  p99 {r.p99_ms:6.3f} ms  {r.rps:7.0f} req/s"
        f"  non-2xx {sum(x.non2xx for x in runs['roost'])}  a2a_send lines {lines}"
    )
    ratio = r.p50_ms / f.p50_ms
    print(f"p50 ratio relay/direct         : {r.p50_ms / d.p50_ms:6.2f}")
    print(f"p50 ratio floor/direct         : {f.p50_ms / d.p50_ms:6.2f}  (no relay on aiohttp can do better)")
    print(f"p50 ratio relay/floor          : {ratio:6.2f}  (target <= 1.25: {'met' if ratio <= 1.25 else 'NOT met'})")
    hop = t.p50_ms - f.p50_ms
    print(
        f"the ordering guarantee alone   : +{hop:.3f} ms = {hop / f.p50_ms:.2f}x the floor"
        f" (floor+guarantee/floor {t.p50_ms / f.p50_ms:.2f}); relay's other work +{r.p50_ms - t.p50_ms:.3f} ms"
    )
    print(f"p50 ratio relay/floor+guarantee: {r.p50_ms / t.p50_ms:6.2f}")


if __name__ == "__main__":
    main()

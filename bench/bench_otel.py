"""OpenTelemetry export on vs off, and the dashboard history ring's memory.

Three daemons in the same run, pinned to the same core, each on its own state: ``off`` (no
``OTEL_*``), ``on`` (export to a local OTLP/HTTP receiver, default sampler) and ``on 1/10``
(``parentbased_traceidratio`` at 0.1). The receiver (an aiohttp app that reads each POST and
answers 200) and the load generators run on the other core. Rounds rotate the daemons' order.

* ``/spawn`` at a fixed 1,000 spawns/s (open loop: latency counted from each request's scheduled
  send time, so a stall is not hidden): p50 and p99 per daemon; target on/off within 5 %.
* ``/spawn`` at saturation (wrk, 50 connections): req/s per daemon and the ratio to ``off``.
* ``POST /a2a/send`` p50 through the relay to a sealed door (wrk, one connection).
* In this process: a spawn decision's cost on the request path, off and on, and the worker's
  cost per span (build, encode) — the figures the HTTP ones are made of, with less noise.
* The history ring: the daemon's RSS with the ring empty and with an hour of samples (720, made
  at once by a daemon whose ring samples every millisecond: nothing waits an hour), and the
  ring's own size by tracemalloc.

Every grant is real (credential, envelope, approval minted, slot reserved), and with export on
every grant is a ``roost.referee.spawn`` span (the worker thread builds and posts it; the queue
is the default 2048 with batches of 512, so the drop counter is printed too).

Run: python bench/bench_otel.py [--rounds 3] [--seconds 5] [--rate 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import CLIENT_CPU, Proc, app_script, make_registry, post_json, start_daemon, start_script, taskset, wrk
from bench_relay import COUNTER, relay_target, start_door

RECEIVER = app_script(
    """
    from aiohttp import web

    POSTS = [0]

    async def traces(request):
        await request.read()
        POSTS[0] += 1
        return web.Response(body=b"", content_type="application/x-protobuf")

    def build_app():
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/traces", traces)
        return app
    """
)

FIXED_RATE = """
import asyncio, json, sys, time
import aiohttp

url, body, creds = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
rate, seconds = float(sys.argv[4]), float(sys.argv[5])

async def main():
    lat, bad = [], 0
    conn = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(connector=conn) as http:
        async def one(i, at):
            nonlocal bad
            hdr = {"content-type": "application/json", "x-murmur-spawn-credential": creds[i % len(creds)]}
            async with http.post(url, data=body, headers=hdr) as resp:
                await resp.read()
                if resp.status != 200:
                    bad += 1
            lat.append(time.perf_counter() - at)
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter() + 0.05
        tasks, n = [], int(rate * seconds)
        for i in range(n):
            at = t0 + i / rate
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(loop.create_task(one(i, at)))
        await asyncio.gather(*tasks)
    lat.sort()
    print(json.dumps({"p50": lat[len(lat) // 2] * 1000, "p99": lat[int(len(lat) * 0.99)] * 1000, "bad": bad, "n": n}))

asyncio.run(main())
"""

SESSIONS = 32  # grants are never redeemed: 32 orchestrators × --max-concurrent 100000 slots


def fixed_rate(url: str, creds: list[str], rate: float, seconds: float) -> dict[str, float]:
    body = json.dumps({"name": "worker", "version": "0.1.0"})
    cmd = [*taskset(CLIENT_CPU), sys.executable, "-c", FIXED_RATE, url + "/spawn", body, json.dumps(creds)]
    out = subprocess.run([*cmd, str(rate), str(seconds)], capture_output=True, text=True, check=True).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def dropped(d: Proc) -> float:
    with subprocess.Popen(["curl", "-s", d.url + "/metrics"], stdout=subprocess.PIPE, text=True) as p:
        text = p.communicate()[0]
    for line in text.splitlines():
        if line.startswith("roost_otel_spans_dropped_total "):
            return float(line.split()[1])
    return 0.0


# A daemon whose history ring samples every millisecond: an hour of samples in about a second.
FAST_RING = """
import sys
from roost.observe import history
history.GaugeHistory.__init__.__defaults__ = (history.KEEP, 0.001)
from roost.cli import main
sys.argv[0] = "mur-roost"
sys.exit(main())
"""
EMPTY_RING = FAST_RING.replace("0.001", "3600.0")


def ring_figures(root: Path, tmp: Path) -> None:
    from roost.observe.history import KEEP, GaugeHistory, Sample

    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    ring = GaugeHistory()
    for i in range(KEEP):
        ring.record(Sample(1_700_000_000_000 + i * 5000, i % 50, i % 7, 0.123 * i, 10 * i, i))
    snap1 = tracemalloc.take_snapshot()
    ring_bytes = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    tracemalloc.stop()
    args = ["--registry-path", str(root), "--spawn-allow", "orchestrator"]
    rss: dict[str, list[int]] = {"empty": [], "full": []}
    for r in range(3):
        for name, code in (("empty", EMPTY_RING), ("full", FAST_RING))[:: 1 if r % 2 == 0 else -1]:
            d = start_daemon([*args, "--state-dir", str(tmp / f"ring-{name}-{r}")], launcher=code)
            try:
                time.sleep(3.0)  # the full one has its 720 samples after ~1 s (and keeps replacing them)
                rss[name].append(rss_kib(d.proc.pid))
            finally:
                d.stop()
    print(f"history ring: {KEEP} samples (an hour at 5 s) hold {ring_bytes / 1024:.1f} KiB (tracemalloc)")
    for name in ("empty", "full"):
        vals = rss[name]
        print(f"  daemon RSS, ring {name:5}: median {statistics.median(vals) / 1024:6.1f} MiB  (runs: {vals} KiB)")
    diff = [f - e for e, f in zip(rss["empty"], rss["full"], strict=True)]
    print(
        f"  RSS full - empty, paired: median {statistics.median(diff):+.0f} KiB (spread {min(diff):+d}..{max(diff):+d})"
    )


def inproc_figures(rounds: int = 5, n: int = 20_000) -> None:
    """What a spawn decision costs on the request path with export off and on, and what the worker
    spends per span (building it, encoding it), in this process: less noisy than the HTTP figures."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from roost.observe.events import EventBus
    from roost.observe.jobspans import decided, spawn_decision
    from roost.observe.otel import OtelExporter
    from roost.observe.otelmap import OtelSettings

    def decisions(bus: EventBus) -> float:
        t = time.perf_counter()
        for _ in range(n):
            decided(spawn_decision(bus, "worker@0.1.0", None), "ses_bench", None)
        return (time.perf_counter() - t) / n * 1e6

    off, on, build, encode = [], [], [], []
    for _ in range(rounds):
        off.append(decisions(EventBus()))
        bus, mem = EventBus(), InMemorySpanExporter()
        settings = OtelSettings(endpoint="http://unused", max_queue_size=10**6, max_export_batch_size=10**6)
        exp = OtelExporter(settings, on_drop=lambda k: None, exporter=mem, root_span=bus.root_span)
        bus.sink = exp.offer
        on.append(decisions(bus))
        t = time.perf_counter()
        exp.flush()
        build.append((time.perf_counter() - t) / n * 1e6)
        spans = mem.get_finished_spans()
        t = time.perf_counter()
        encode_spans(spans).SerializeToString()
        encode.append((time.perf_counter() - t) / len(spans) * 1e6)

    def fig(xs: list[float]) -> str:
        return f"{statistics.median(xs):6.2f} us  ({min(xs):.2f}..{max(xs):.2f})"

    print(f"request path per spawn decision, export off : {fig(off)}")
    print(f"request path per spawn decision, export on  : {fig(on)}")
    print(f"worker thread per span: build {fig(build)}; OTLP encode {fig(encode)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--skip-ring", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        root = tmp / "registry"
        make_registry(
            root,
            {
                "orchestrator": {"capabilities": {"spawn": {"allow": ["worker"]}, "network": {"allow": ["127.0.0.1"]}}},
                "worker": {"capabilities": {"network": {"allow": ["127.0.0.1"]}}},
                # the relay's sender and receiver (bench/bench_relay.py)
                "sender": {"capabilities": {"network": {"allow": ["127.0.0.1"]}}},
                "receiver": {"capabilities": {"network": {"allow": ["127.0.0.1"]}}},
            },
        )
        receiver = start_script(RECEIVER, cpu=CLIENT_CPU)
        endpoint = receiver.url
        flavours = {
            "off": {},
            "on": {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
            "on 1/10": {
                "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                "OTEL_TRACES_SAMPLER_ARG": "0.1",
            },
        }
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        daemons: dict[str, Proc] = {}
        doors: dict[str, Proc] = {}
        relays: dict[str, tuple[str, dict[str, str]]] = {}
        creds: dict[str, list[str]] = {}
        try:
            for name, extra in flavours.items():
                state = tmp / f"state-{name.replace(' ', '').replace('/', '')}"
                daemons[name] = start_daemon(
                    [
                        "--registry-path",
                        str(root),
                        "--state-dir",
                        str(state),
                        "--spawn-allow",
                        "orchestrator",
                        "--spawn-allow",
                        "sender",
                        "--spawn-allow",
                        "receiver",
                        "--max-concurrent",
                        "100000",
                        "--max-live-capsules",
                        "1000000",
                    ],
                    env={**base_env, **extra},
                )
                d = daemons[name]
                creds[name] = [
                    post_json(
                        d.url + "/register", {"session_id": f"ses_bench{i}", "name": "orchestrator", "version": "0.1.0"}
                    )["credential"]
                    for i in range(SESSIONS)
                ]
                doors[name] = start_door("0")
                body, hdr, _ = relay_target(d, doors[name], state.with_name(state.name + "-relay"))
                relays[name] = (body, hdr)
            names = list(flavours)
            fixed: dict[str, list[dict[str, float]]] = {n: [] for n in names}
            sat: dict[str, list[float]] = {n: [] for n in names}
            relay: dict[str, list[float]] = {n: [] for n in names}
            spawn_body = json.dumps({"name": "worker", "version": "0.1.0"})
            hdr = {"content-type": "application/json"}
            for name in names:  # warm-up
                fixed_rate(daemons[name].url, creds[name], args.rate, 1)
            for r in range(args.rounds):
                order = names[r % len(names) :] + names[: r % len(names)]
                for name in order:
                    d = daemons[name]
                    fixed[name].append(fixed_rate(d.url, creds[name], args.rate, args.seconds))
                    res = wrk(
                        d.url + "/spawn",
                        method="POST",
                        body=spawn_body,
                        headers=hdr,
                        seconds=args.seconds,
                        rotate=("x-murmur-spawn-credential", creds[name]),
                    )
                    sat[name].append(res.rps)
                    body, rh = relays[name]
                    rel = wrk(
                        d.url + "/a2a/send",
                        method="POST",
                        body=body,
                        headers=rh,
                        connections=1,
                        seconds=3,
                        counter=COUNTER,
                    )
                    relay[name].append(rel.p50_ms)
                    f = fixed[name][-1]
                    print(
                        f"round {r + 1} {name:8}: /spawn @ {args.rate:.0f}/s"
                        f" p50 {f['p50']:6.2f} ms p99 {f['p99']:6.2f} ms"
                        f" (non-200 {f['bad']:.0f}) | saturation {res.rps:7.0f} req/s | relay p50 {rel.p50_ms:5.2f} ms",
                        flush=True,
                    )
            print()
            print(f"{'daemon':9} {'p50@rate':>9} {'p99@rate':>9} {'sat req/s':>10} {'relay p50':>10}  dropped spans")
            for name in names:
                p50 = statistics.median(x["p50"] for x in fixed[name])
                p99 = statistics.median(x["p99"] for x in fixed[name])
                print(
                    f"{name:9} {p50:7.2f}ms {p99:7.2f}ms {statistics.median(sat[name]):10.0f}"
                    f" {statistics.median(relay[name]):8.2f}ms  {dropped(daemons[name]):.0f}"
                )
            print("\nratios to 'off' (paired per round: median, and min..max over rounds)")
            for name in names[1:]:
                for label, series in (
                    ("p50 @ rate", [(a["p50"], b["p50"]) for a, b in zip(fixed[name], fixed["off"], strict=True)]),
                    ("p99 @ rate", [(a["p99"], b["p99"]) for a, b in zip(fixed[name], fixed["off"], strict=True)]),
                    ("saturation req/s", list(zip(sat[name], sat["off"], strict=True))),
                    ("relay p50", list(zip(relay[name], relay["off"], strict=True))),
                ):
                    ratios = [a / b for a, b in series if b]
                    print(
                        f"  {name:8} {label:17}: {statistics.median(ratios):5.3f}x"
                        f"  ({min(ratios):5.3f}..{max(ratios):5.3f})"
                    )
        finally:
            for p in [*daemons.values(), *doors.values(), receiver]:
                p.stop()
        print()
        inproc_figures()
        if not args.skip_ring:
            print()
            ring_figures(root, tmp)


if __name__ == "__main__":
    main()

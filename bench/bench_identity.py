"""What knowing the caller costs: /spawn and redeem with and without the sock_diag lookup, and
launch latency with and without a per-job cgroup.

Two daemons on the same core in the same run: one looks up the uid behind every connection
(``NETLINK_SOCK_DIAG``, the shipped behaviour), the baseline skips it (``NO_LOOKUP``: the
daemon started through a launcher that replaces the lookup in its own process, believing every
loopback peer is the daemon's own uid as roost did before it asked; the shipped daemon has no
switch for that). wrk sends ``Connection: close``, so
every request is a new connection and pays the lookup; 5,000 idle connections are held open
to each daemon meanwhile (the lookup is exact, so their number must not matter). Rounds
alternate (baseline, lookup, baseline, …); the median of each is reported with the ratio
(target: the lookup costs at most 10 %).

Launch latency: ``POST /jobs`` of a script capsule until its ready answer, ``job_cgroups =
"auto"`` vs ``"off"``, alternating, median of N each.

Run: python bench/bench_identity.py [--seconds 5] [--rounds 3] [--idle 5000] [--launches 10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import Proc, make_registry, post_json, start_daemon, start_script, wrk

NO_LOOKUP = """
import os, runpy, sys
import roost.http.caller as caller
from roost.core.loopback import is_loopback_peer
caller.owner_uid = lambda remote, local: os.geteuid() if is_loopback_peer(str(remote[0])) else None
caller.tcp_peer_uid = lambda sock: os.geteuid()  # the baseline serves loopback TCP only
sys.argv = ["roost", *sys.argv[1:]]
runpy.run_module("roost", run_name="__main__", alter_sys=True)
"""
"""The baseline daemon: ``python -c NO_LOOKUP <daemon arguments>``."""

CARD_SERVER = """
import asyncio
from aiohttp import web

holder = {}

async def card(request):
    return web.json_response({"name": "reader", "url": holder["url"], "version": "0.1.0"})

async def main():
    app = web.Application()
    app.router.add_get("/.well-known/agent-card.json", card)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    holder["url"] = f"http://127.0.0.1:{port}/"
    print(port, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def _raise_nofile(want: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _hold_idle(port: int, n: int) -> list[socket.socket]:
    out = []
    for i in range(n):
        out.append(socket.create_connection(("127.0.0.1", port)))
        if i % 500 == 499:
            time.sleep(0.05)
    return out


def _config(tmp: Path, name: str, registry: Path, extra: str = "") -> Path:
    cfg = tmp / f"{name}.toml"
    cfg.write_text(
        f'registry_path = "{registry}"\nstate_dir = "{tmp / name}"\nspawn_allow = ["sharer", "quick"]\n'
        "max_connections_per_uid = 100000\nheader_timeout_secs = 3600.0\nmax_concurrent = 100000\n"
        f"max_live_capsules = 100000\n{extra}"
    )
    return cfg


def _prepare(daemon: Proc, workdir: Path, card: Proc) -> dict[str, str]:
    sid = "ses_" + os.urandom(8).hex()
    cred = post_json(
        daemon.url + "/register", {"session_id": sid, "name": "sharer", "version": "0.1.0", "workdir": str(workdir)}
    )["credential"]
    hdr = {"x-murmur-spawn-credential": cred}
    minted = post_json(daemon.url + "/handles", {"path": "small.bin", "peer": card.url}, hdr)
    return {"cred": cred, "handle": minted["handle"], "audience": minted["audience"]}


def _launch_ms(url: str, workdir: Path) -> float:
    body = json.dumps({"name": "quick", "version": "0.1.0", "workdir": str(workdir), "task": "go"}).encode()
    req = urllib.request.Request(url + "/jobs", data=body, method="POST", headers={"content-type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as resp:
        resp.read()
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle", type=int, default=5000)
    ap.add_argument("--launches", type=int, default=10)
    ap.add_argument("--connections", type=int, default=20)
    args = ap.parse_args()
    _raise_nofile(2 * args.idle + 4096)
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        registry = tmp / "registry"
        make_registry(
            registry,
            {
                "sharer": {
                    "capabilities": {"network": {"allow": ["127.0.0.1"]}, "spawn": {"allow": ["sharer"]}},
                    "exports": {"peer_files": {"root": "share", "max_bytes": "10Mi"}},
                },
                "quick": {"script": "print('done')\n", "lifecycle": {"after_task": "exit"}},
            },
        )
        workdir = tmp / "work"
        (workdir / "share").mkdir(parents=True)
        (workdir / "share" / "small.bin").write_bytes(os.urandom(4096))
        card = start_script(CARD_SERVER, cpu="1")
        looked = start_daemon(["--config", str(_config(tmp, "lookup", registry))])
        plain = start_daemon(["--config", str(_config(tmp, "baseline", registry))], launcher=NO_LOOKUP)
        idle: list[socket.socket] = []
        spawn: dict[str, list[float]] = {"baseline": [], "lookup": []}
        redeem: dict[str, list[float]] = {"baseline": [], "lookup": []}
        try:
            setups = {"baseline": _prepare(plain, workdir, card), "lookup": _prepare(looked, workdir, card)}
            daemons = {"baseline": plain, "lookup": looked}
            idle = _hold_idle(plain.port, args.idle) + _hold_idle(looked.port, args.idle)
            for rnd in range(args.rounds + 1):
                for name in ("baseline", "lookup"):
                    d, s = daemons[name], setups[name]
                    secs = 1 if rnd == 0 else args.seconds  # round 0 warms up
                    sp = wrk(
                        d.url + "/spawn",
                        method="POST",
                        body=json.dumps({"name": "sharer", "version": "0.1.0"}),
                        headers={
                            "content-type": "application/json",
                            "x-murmur-spawn-credential": s["cred"],
                            "Connection": "close",
                        },
                        connections=args.connections,
                        seconds=secs,
                    )
                    rd = wrk(
                        f"{d.url}/resources/peer/{s['handle']}",
                        headers={"x-murmur-audience": s["audience"], "Connection": "close"},
                        connections=args.connections,
                        seconds=secs,
                    )
                    if rnd:
                        spawn[name].append(sp.rps)
                        redeem[name].append(rd.rps)
        finally:
            for sock in idle:
                sock.close()
            looked.stop()
            plain.stop()
        # Launch latency, cgroup vs fallback.
        launch: dict[str, list[float]] = {"cgroup": [], "fallback": []}
        with_cg = start_daemon(["--config", str(_config(tmp, "cg", registry, 'job_cgroups = "auto"\n'))])
        without = start_daemon(["--config", str(_config(tmp, "nocg", registry, 'job_cgroups = "off"\n'))])
        try:
            for i in range(args.launches + 1):
                for name, d in (("fallback", without), ("cgroup", with_cg)):
                    wd = tmp / f"launch-{name}-{i}"
                    wd.mkdir(mode=0o700)
                    ms = _launch_ms(d.url, wd)
                    if i:
                        launch[name].append(ms)
                    time.sleep(0.2)
        finally:
            with_cg.stop()
            without.stop()
        card.stop()
    med = statistics.median
    print(f"idle connections held open per daemon: {args.idle}; wrk -c{args.connections}, Connection: close")
    for label, data in (("/spawn", spawn), ("redeem 4 KiB", redeem)):
        b, lk = med(data["baseline"]), med(data["lookup"])
        print(
            f"{label:14s} baseline (no lookup): {b:8.0f} req/s   with sock_diag lookup: {lk:8.0f} req/s   "
            f"ratio {lk / b:5.2f}x  (cost {100 * (1 - lk / b):5.1f} %, target <= 10 %)"
        )
    f, c = med(launch["fallback"]), med(launch["cgroup"])
    print(f"launch latency   fallback (no cgroup): {f:7.1f} ms   per-job cgroup: {c:7.1f} ms   ratio {c / f:5.2f}x")


if __name__ == "__main__":
    main()

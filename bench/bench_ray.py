"""The Ray backend against the local backend, measured in the same run, rounds alternating.

* **Launch latency** ``POST /jobs`` → 201 (the child's ready line) for a tiny runtime child: a
  daemon with ``launcher = "ray"`` on a warm 3-node test cluster vs a daemon with the local
  backend. Target: Ray p50 ≤ local p50 + 50 ms.
* **Storm**: 200 concurrent launches of a short child spread over the 3 nodes vs 200 on the
  local backend: wall time until all ended, and the daemon's event-loop lag p99 over the storm
  (``GET /debug/loop-lag``; target ≤ 20 ms).
* **Memory**: daemon RSS per running remote child, and the node keepers' RSS per child (the
  target is no Ray worker per child: only the keeper per node is one).

The cluster is ``ray.cluster_utils.Cluster`` on this machine (head + 2 workers, each with a
custom resource; no dashboard; ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` keeps it on loopback),
stopped by its own handle.

``--local-only`` runs only the storm on the local backend (no cluster), to iterate on the
daemon's own loop work. ``--baseline DIR`` adds daemons running the roost checkout at ``DIR``
(e.g. an export of main) beside this checkout's, rounds alternating, so a change is measured
before/after in one run.

Run: python bench/bench_ray.py [--n 40] [--storm 200] [--hold 60] [--rounds 2]
     [--local-only] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import make_registry, start_daemon

CHILD = """
import json, os, sys, time
name = sys.argv[1].split("@")[0]
sys.stdin.readline()
print(json.dumps({"session_id": "ses_" + os.urandom(8).hex(), "capsule_url": None}), flush=True)
if name.startswith("short"):
    time.sleep(0.5)
elif name == "sleepy":
    fd = int(os.environ["MURMUR_SPAWNER_LIFELINE"])
    time.sleep(3600)
"""


# One short capsule per node (pinned by the node's custom resource), so a storm spans all three.
SHORT = ("short-head", "short-w1", "short-w2")
PLACEMENT = {name: {"resources": {name.split("-")[1]: 1}} for name in SHORT}


def write_config(tmp: Path, name: str, **extra: Any) -> Path:
    root = tmp / "registry"
    if not root.exists():
        (tmp / "child.py").write_text(CHILD)
        make_registry(root, {name: {} for name in ("quick", *SHORT, "sleepy")})
    lines = [
        f'registry_path = "{root}"',
        f'state_dir = "{tmp / name / "state"}"',
        f"spawn_allow = {json.dumps(['quick', *SHORT, 'sleepy'])}",
        f'runtime_command = ["{sys.executable}", "-S", "{tmp / "child.py"}"]',
        "max_live_capsules = 100000",
        "stop_grace_secs = 2.0",
    ]
    placement = extra.pop("ray_placement", None)
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    for capsule, place in (placement or {}).items():
        res = ", ".join(f'"{k}" = {v}' for k, v in place["resources"].items())
        lines.append(f'[ray_placement."{capsule}"]\nresources = {{ {res} }}')
    cfg = tmp / f"{name}.toml"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def pct(xs: list[float], p: int) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[p - 1]


async def launch(http: aiohttp.ClientSession, url: str, name: str) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    async with http.post(url + "/jobs", json={"name": name, "version": "0.1.0", "task": "go"}) as resp:
        body = await resp.json()
        assert resp.status == 201, body
    return time.perf_counter() - t0, body


async def cancel(http: aiohttp.ClientSession, url: str, job_id: str) -> None:
    async with http.post(url + f"/jobs/{job_id}/cancel") as resp:
        await resp.read()


async def wait_ended(http: aiohttp.ClientSession, url: str, job_ids: list[str]) -> None:
    pending = set(job_ids)
    while pending:
        for jid in list(pending):
            async with http.get(url + f"/jobs/{jid}") as resp:
                if (await resp.json())["state"] not in ("starting", "running"):
                    pending.discard(jid)
        await asyncio.sleep(0.2)


# A bare asyncio process that samples its own loop lag like the daemon's probe (sleep 50 ms,
# how late it woke) until its stdin closes, then prints p50 and p99 in ms: the lag floor this
# machine imposes on any loop during a storm, whatever the daemon does.
BARE_LAG = """
import asyncio, statistics, sys
async def main():
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.add_reader(0, lambda: done.done() or done.set_result(None))
    lags = []
    while not done.done():
        t0 = loop.time()
        await asyncio.sleep(0.05)
        lags.append(max(0.0, loop.time() - t0 - 0.05))
    q = statistics.quantiles(lags, n=100, method="inclusive")
    print(round(q[49] * 1000, 3), round(q[98] * 1000, 3), flush=True)
asyncio.run(main())
"""


async def storm(http: aiohttp.ClientSession, url: str, n: int) -> tuple[float, dict[str, Any]]:
    """Wall time of ``n`` concurrent launches until all ended, the daemon's loop lag over it, and
    (``floor_p50_ms``/``floor_p99_ms``) a bare loop's lag over the same storm."""
    async with http.get(url + "/debug/loop-lag?reset=1") as resp:
        await resp.read()
    bare = await asyncio.create_subprocess_exec(
        sys.executable, "-c", BARE_LAG, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    t0 = time.perf_counter()
    results = await asyncio.gather(*(launch(http, url, SHORT[i % 3]) for i in range(n)))
    await wait_ended(http, url, [b["job_id"] for _, b in results])
    took = time.perf_counter() - t0
    async with http.get(url + "/debug/loop-lag") as resp:
        lag = await resp.json()
    out, _ = await bare.communicate(b"")
    lag["floor_p50_ms"], lag["floor_p99_ms"] = map(float, out.split())
    return took, lag


def start_at(src: str | None, cfg: Path) -> Any:
    """A daemon on ``cfg`` running this checkout, or the roost checkout at ``src``."""
    if src is None:
        return start_daemon(["--config", str(cfg)], cpu="0-1")
    env = {**os.environ, "PYTHONPATH": src, "PYTHONSAFEPATH": "1"}
    return start_daemon(["--config", str(cfg)], cpu="0-1", env=env)


async def run_storms(http: aiohttp.ClientSession, daemons: dict[str, str], n_storm: int, rounds: int) -> None:
    """``rounds`` storms on every daemon, alternating; wall time and loop lag per daemon."""
    storms: dict[str, list[tuple[float, dict[str, Any]]]] = {label: [] for label in daemons}
    for _ in range(rounds):
        for label, url in daemons.items():
            storms[label].append(await storm(http, url, n_storm))
    print(f"storm of {n_storm} concurrent launches (short children), {rounds} rounds each, alternating:")
    for label in daemons:
        walls = sorted(w for w, _ in storms[label])
        p50s = sorted(lag["p50_ms"] for _, lag in storms[label])
        p99s = sorted(lag["p99_ms"] for _, lag in storms[label])
        f50 = statistics.median(lag["floor_p50_ms"] for _, lag in storms[label])
        f99 = statistics.median(lag["floor_p99_ms"] for _, lag in storms[label])
        print(
            f"  {label:10}: wall median {statistics.median(walls):.2f}s (best {walls[0]:.2f}s); "
            f"loop lag p50 median {statistics.median(p50s):.1f} ms, p99 median {statistics.median(p99s):.1f} ms "
            f"(best {p99s[0]:.1f}, worst {p99s[-1]:.1f}; target ≤ 20 ms: "
            f"{'met' if statistics.median(p99s) <= 20 else 'NOT met'}, x{statistics.median(p99s) / 20:.2f} of it); "
            f"bare loop beside it p50 {f50:.1f} ms, p99 {f99:.1f} ms "
            f"(the daemon's p99 minus that floor: {statistics.median(p99s) - f99:+.1f} ms)"
        )
    base = next(iter(daemons))
    for label in list(daemons)[1:]:
        ratio = statistics.median(w for w, _ in storms[label]) / statistics.median(w for w, _ in storms[base])
        print(f"  {label}/{base} wall (medians) x{ratio:.2f}")


async def main_local(n_storm: int, rounds: int, baseline: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        daemons = {"local": start_at(None, write_config(tmp, "local"))}
        if baseline is not None:
            daemons["local-base"] = start_at(baseline, write_config(tmp, "local-base"))
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
                for d in daemons.values():
                    for _ in range(3):
                        _, body = await launch(http, d.url, "quick")
                        await cancel(http, d.url, body["job_id"])
                await run_storms(http, {k: d.url for k, d in daemons.items()}, n_storm, rounds)
        finally:
            for d in daemons.values():
                d.stop()


def keeper_rss() -> tuple[int, int]:
    """Summed RSS and count of this machine's roost node keepers (Ray workers running NodeKeeper)."""
    total, count = 0, 0
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if "ray::NodeKeeper" in cmd:
                total += proc.memory_info().rss
                count += 1
        except psutil.Error:
            continue
    return total, count


async def main_async(n: int, n_storm: int, hold: int, rounds: int, baseline: str | None) -> None:
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 64, "resources": {"head": 1000}, "include_dashboard": False},
    )
    for name in ("w1", "w2"):
        cluster.add_node(num_cpus=64, resources={name: 1000})
    cluster.wait_for_nodes()
    try:
        with tempfile.TemporaryDirectory() as tmpd:
            tmp = Path(tmpd)
            daemons: dict[str, Any] = {}
            try:
                for suffix, src in [("", None), *([("-base", baseline)] if baseline else [])]:
                    daemons["local" + suffix] = start_at(src, write_config(tmp, "local" + suffix))
                    ray_cfg = write_config(
                        tmp,
                        "ray" + suffix,
                        launcher="ray",
                        ray_address=cluster.address,
                        ray_namespace="bench" + suffix,
                        ray_node_root=str(tmp / ("nodes" + suffix)),
                        ray_placement=PLACEMENT,
                    )
                    daemons["ray" + suffix] = start_at(src, ray_cfg)
                await run_rounds(
                    {k: d.url for k, d in daemons.items()}, daemons["ray"].proc.pid, n, n_storm, hold, rounds
                )
            finally:
                for d in daemons.values():
                    d.stop()
    finally:
        cluster.shutdown()


def cluster_workers() -> int:
    """Ray worker processes (``default_worker``) under this bench's own cluster: the raylets are
    this process's descendants, so other Ray clusters on the machine are not counted."""
    count = 0
    for proc in psutil.Process().children(recursive=True):
        try:
            if "default_worker" in " ".join(proc.cmdline()):
                count += 1
        except psutil.Error:
            continue
    return count


async def run_rounds(daemons: dict[str, str], remote_pid: int, n: int, n_storm: int, hold: int, rounds: int) -> None:
    local, remote = daemons["local"], daemons["ray"]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        # Warm up: every node keeper started, the artifact cached on every node.
        for _ in range(6):
            for url in daemons.values():
                _, body = await launch(http, url, "quick")
                await cancel(http, url, body["job_id"])
        lat: dict[str, list[float]] = {"local": [], "ray": []}
        for _ in range(n):
            for label, url in (("local", local), ("ray", remote)):
                took, body = await launch(http, url, "quick")
                lat[label].append(took * 1000)
                await cancel(http, url, body["job_id"])
        lp50, rp50 = statistics.median(lat["local"]), statistics.median(lat["ray"])
        print(f"launch latency POST /jobs → ready, {n} rounds alternating (warm cluster):")
        print(f"  local backend: p50 {lp50:.1f} ms, p99 {pct(lat['local'], 99):.1f} ms")
        print(
            f"  ray backend:   p50 {rp50:.1f} ms, p99 {pct(lat['ray'], 99):.1f} ms; "
            f"ray − local p50 {rp50 - lp50:+.1f} ms (target ≤ +50 ms: {'met' if rp50 - lp50 <= 50 else 'NOT met'}), "
            f"ratio x{rp50 / lp50:.2f}"
        )
        await run_storms(http, daemons, n_storm, rounds)
        # Memory: hold `hold` sleepy children on the Ray backend.
        daemon = psutil.Process(remote_pid)
        before = daemon.memory_info().rss
        k_before, k_count = keeper_rss()
        workers_before = cluster_workers()
        held = await asyncio.gather(*(launch(http, remote, "sleepy") for _ in range(hold)))
        await asyncio.sleep(2)
        after = daemon.memory_info().rss
        k_after, k_count_after = keeper_rss()
        workers_during = cluster_workers()
        await asyncio.gather(*(cancel(http, remote, b["job_id"]) for _, b in held))
        extra = workers_during - workers_before
        print(f"memory with {hold} running remote children:")
        print(f"  daemon RSS per remote child: {(after - before) / hold / 1024:.1f} KiB")
        print(f"  keepers: {k_count_after} (was {k_count}), RSS per child {(k_after - k_before) / hold / 1024:.1f} KiB")
        print(
            f"  Ray worker processes of this bench's cluster: {workers_before} before, {workers_during} with the "
            f"children held: {extra:+d} (target: 0 per child: {'met' if extra <= 0 else 'NOT met'})"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--storm", type=int, default=200)
    ap.add_argument("--hold", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--local-only", action="store_true", help="only the storm, local backend, no cluster")
    ap.add_argument("--baseline", help="also run daemons from the roost checkout at this directory")
    a = ap.parse_args()
    if a.local_only:
        asyncio.run(main_local(a.storm, a.rounds, a.baseline))
    else:
        asyncio.run(main_async(a.n, a.storm, a.hold, a.rounds, a.baseline))


if __name__ == "__main__":
    main()

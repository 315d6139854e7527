"""Scale: 500 live sleeper children supervised at once; the daemon's RSS and its growth per child.

Each child is a tiny runtime that reports ready and sleeps. The daemon holds, per child: one
pidfd (exit watch), one stdout pipe, one job record, one timer; the lifeline write end lives in
the keeper, whose RSS is reported too.

Run: python bench/bench_scale.py [--n 500]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import direct_storm, start_daemon
from bench_spawn import write_setup


def keeper_rss(state_dir: Path) -> float:
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "roost.backends.local.holder" in cmd and str(state_dir) in cmd:
            return proc.memory_info().rss / 2**20
    return float("nan")


async def main_async(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        cfg = write_setup(tmp)
        argv = [sys.executable, "-S", str(tmp / "child.py"), "sleepy@0.1.0", "--workdir", tmpd, "--json"]
        direct_s, _ = direct_storm(argv, n, limit=40, kill=True)  # same-run baseline: no daemon
        daemon = start_daemon(["--config", str(cfg)])
        proc = psutil.Process(daemon.proc.pid)
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=50)) as http:
                # Warm the code paths once so the baseline includes them.
                async with http.post(daemon.url + "/jobs", json={"name": "quick", "version": "0.1.0"}) as resp:
                    assert resp.status == 201
                await asyncio.sleep(0.5)
                before = proc.memory_info().rss / 2**20
                async with http.get(daemon.url + "/debug/loop-lag?reset=1") as resp:
                    await resp.read()
                await asyncio.sleep(3)
                async with http.get(daemon.url + "/debug/loop-lag") as resp:
                    idle_lag = await resp.json()
                t0 = time.perf_counter()
                sem = asyncio.Semaphore(40)

                async def one() -> None:
                    async with sem, http.post(daemon.url + "/jobs", json={"name": "sleepy", "version": "0.1.0"}) as r:
                        assert r.status == 201, await r.text()

                await asyncio.gather(*(one() for _ in range(n)))
                took = time.perf_counter() - t0
                await asyncio.sleep(1.0)
                after = proc.memory_info().rss / 2**20
                fds = proc.num_fds()
                threads = proc.num_threads()
                krss = keeper_rss(tmp / "state")
                async with http.get(daemon.url + "/debug/loop-lag?reset=1") as resp:
                    await resp.read()
                await asyncio.sleep(3)
                async with http.get(daemon.url + "/debug/loop-lag") as resp:
                    lag = await resp.json()
        finally:
            t1 = time.perf_counter()
            daemon.stop()
            stop_s = time.perf_counter() - t1
    print(
        f"{n} live children launched in {took:.1f}s; baseline, same run: {n} started directly (40 at a time, "
        f"no daemon) in {direct_s:.1f}s, roost/direct x{took / direct_s:.2f}"
    )
    print(
        f"  daemon RSS {before:.1f} MiB → {after:.1f} MiB: +{after - before:.1f} MiB, "
        f"{(after - before) * 1024 / n:.1f} KiB per child; {fds} fds, {threads} threads"
    )
    print(f"  keeper RSS {krss:.1f} MiB holding {n} lifelines")
    print(
        f"  idle loop lag with {n} children: p99 {lag.get('p99_ms')} ms (with none, same run: p99 "
        f"{idle_lag.get('p99_ms')} ms); orderly stop ended all in {stop_s:.1f}s"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500)
    asyncio.run(main_async(ap.parse_args().n))


if __name__ == "__main__":
    main()

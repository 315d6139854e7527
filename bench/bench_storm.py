"""Storm: 200 concurrent ``POST /jobs`` of a short capsule; the daemon's event-loop lag p99 must
stay ≤ 20 ms and all 200 must complete.

Lag is measured inside the daemon by the launcher's probe (a 50 ms sleep that reports how late it
woke), read back from ``GET /debug/loop-lag`` (reset just before the storm).

Run: python bench/bench_storm.py [--n 200]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import start_daemon
from bench_spawn import write_setup


async def main_async(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmpd:
        cfg = write_setup(Path(tmpd))
        daemon = start_daemon(["--config", str(cfg)], cpu="0-1")
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
                async with http.get(daemon.url + "/debug/loop-lag?reset=1") as resp:
                    await resp.read()
                t0 = time.perf_counter()

                async def one() -> str:
                    async with http.post(
                        daemon.url + "/jobs", json={"name": "short", "version": "0.1.0", "task": "go"}
                    ) as resp:
                        body = await resp.json()
                        assert resp.status == 201, body
                        return str(body["job_id"])

                job_ids = await asyncio.gather(*(one() for _ in range(n)))
                ready_s = time.perf_counter() - t0
                pending = set(job_ids)
                while pending:
                    for jid in list(pending):
                        async with http.get(daemon.url + f"/jobs/{jid}") as resp:
                            state = (await resp.json())["state"]
                        if state not in ("starting", "running"):
                            pending.discard(jid)
                    await asyncio.sleep(0.2)
                done_s = time.perf_counter() - t0
                async with http.get(daemon.url + "/debug/loop-lag") as resp:
                    lag = await resp.json()
        finally:
            daemon.stop()
    print(f"storm of {n} concurrent launches: all ready in {ready_s:.2f}s, all ended in {done_s:.2f}s")
    print(
        f"  daemon event-loop lag over {lag['samples']} probes: p50 {lag['p50_ms']} ms, "
        f"p99 {lag['p99_ms']} ms, max {lag['max_ms']} ms (target p99 ≤ 20 ms)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    asyncio.run(main_async(ap.parse_args().n))


if __name__ == "__main__":
    main()

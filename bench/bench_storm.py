"""Storm: 200 concurrent ``POST /jobs`` of a short capsule; the daemon's event-loop lag p99 must
stay ≤ 20 ms and all 200 must complete.

Lag is measured inside the daemon by the launcher's probe (a 50 ms sleep that reports how late it
woke), read back from ``GET /debug/loop-lag`` (reset just before the storm). Baselines measured in
the same run: the same daemon's lag while idle for as long as the storm took, and the same 200
children started directly by a bare asyncio process (no daemon) on the same cores.

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
from _harness import direct_storm, start_daemon
from bench_spawn import write_setup


async def main_async(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        cfg = write_setup(tmp)
        argv = [sys.executable, "-S", str(tmp / "child.py"), "short@0.1.0", "--workdir", tmpd, "--json"]
        direct_ready, direct_done = direct_storm(argv, n, limit=n, kill=False, cpu="0-1")
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
                # The idle baseline: the same daemon, the same span of time, no storm.
                async with http.get(daemon.url + "/debug/loop-lag?reset=1") as resp:
                    await resp.read()
                await asyncio.sleep(done_s)
                async with http.get(daemon.url + "/debug/loop-lag") as resp:
                    idle = await resp.json()
        finally:
            daemon.stop()
    print(f"storm of {n} concurrent launches: all ready in {ready_s:.2f}s, all ended in {done_s:.2f}s")
    print(
        f"  baseline, same run: {n} direct starts all ready in {direct_ready:.2f}s, all ended in "
        f"{direct_done:.2f}s; roost/direct ready x{ready_s / direct_ready:.2f}, ended x{done_s / direct_done:.2f}"
    )
    print(
        f"  daemon event-loop lag over {lag['samples']} probes: p50 {lag['p50_ms']} ms, "
        f"p99 {lag['p99_ms']} ms, max {lag['max_ms']} ms (target p99 ≤ 20 ms); idle baseline p99 "
        f"{idle['p99_ms']} ms, max {idle['max_ms']} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    asyncio.run(main_async(ap.parse_args().n))


if __name__ == "__main__":
    main()

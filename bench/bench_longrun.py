"""Long run: RSS and database size every 10 s over a sustained register → spawn → redeem → deregister cycle.

A daemon with a compressed retention (``--retention SECS``: ended sessions and finished jobs
leave the database after SECS, memory after SECS/2, swept every SECS/5) takes the cycle from
``--clients`` concurrent loops for ``--seconds``. Each cycle registers a top-level session,
spawns, redeems the approval as a child session, deregisters both. Samples of the daemon's RSS
and of roost.db + its WAL are printed every 10 s. Target: both flat after the first retention
window; the summary compares the last sample with the first one after the window has filled
(three retention periods in; same run).

Run: python bench/bench_longrun.py [--seconds 120] [--retention 20] [--clients 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import make_registry, start_daemon

SAMPLE_SECS = 10.0


async def cycle(http: aiohttp.ClientSession, url: str) -> None:
    sid = f"ses_{os.urandom(8).hex()}"
    async with http.post(url + "/register", json={"session_id": sid, "name": "orchestrator", "version": "0.1.0"}) as r:
        cred = (await r.json())["credential"]
    head = {"x-murmur-spawn-credential": cred}
    async with http.post(url + "/spawn", json={"name": "worker", "version": "0.1.0"}, headers=head) as r:
        approval = (await r.json())["approval"]
    kid = f"ses_{os.urandom(8).hex()}"
    async with http.post(
        url + "/register",
        json={"session_id": kid, "name": "worker", "version": "0.1.0"},
        headers={"x-murmur-spawn-approval": approval},
    ) as r:
        kid_cred = (await r.json())["credential"]
    for c in (kid_cred, cred):
        async with http.post(
            url + "/deregister", json={"outcome": "complete"}, headers={"x-murmur-spawn-credential": c}
        ) as r:
            assert r.status == 200, await r.text()


def db_bytes(state: Path) -> int:
    return sum((state / f"roost.db{s}").stat().st_size for s in ("", "-wal") if (state / f"roost.db{s}").exists())


async def run(seconds: float, retention: float, clients: int) -> None:
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        registry = tmp / "registry"
        registry.mkdir()
        make_registry(registry, {"orchestrator": {"capabilities": {"spawn": {"allow": ["worker"]}}}, "worker": {}})
        state = tmp / "state"
        cfg = tmp / "roost.toml"
        cfg.write_text(
            f'registry_path = "{registry}"\nspawn_allow = ["orchestrator"]\nstate_dir = "{state}"\n'
            f"retention_secs = {retention}\nsession_memory_secs = {retention / 2}\n"
            f"retention_sweep_secs = {max(0.5, retention / 5)}\nmax_live_capsules = 1000\n"
            # One uid drives every cycle here, far past a per-user flood guard's default.
            "uid_registrations_per_minute = 0\n"
        )
        daemon = start_daemon(["--config", str(cfg)])
        proc = psutil.Process(daemon.proc.pid)
        done = 0
        stop = time.monotonic() + seconds
        samples: list[tuple[float, int, float, float]] = []
        try:
            async with aiohttp.ClientSession() as http:

                async def loop() -> None:
                    nonlocal done
                    while time.monotonic() < stop:
                        await cycle(http, daemon.url)
                        done += 1

                async def sample() -> None:
                    t0 = time.monotonic()
                    while time.monotonic() < stop:
                        await asyncio.sleep(SAMPLE_SECS)
                        t = time.monotonic() - t0
                        rss = proc.memory_info().rss / 2**20
                        size = db_bytes(state) / 2**20
                        samples.append((t, done, rss, size))
                        print(f"{t:6.0f}s cycles={done:>7} rss={rss:7.1f} MiB db+wal={size:7.2f} MiB", flush=True)

                await asyncio.gather(sample(), *(loop() for _ in range(clients)))
        finally:
            daemon.stop()
        # Steady state: a full retention window of rows on disk, swept, and the WAL checkpointed.
        settled = [s for s in samples if s[0] >= retention * 3] or samples[-1:]
        first, last = settled[0], samples[-1]
        print(
            f"after the first retention window ({first[0]:.0f}s) to the end ({last[0]:.0f}s):"
            f" RSS {first[2]:.1f} -> {last[2]:.1f} MiB (x{last[2] / first[2]:.2f}),"
            f" db+wal {first[3]:.2f} -> {last[3]:.2f} MiB (x{last[3] / max(first[3], 1e-9):.2f}),"
            f" {last[1]} cycles ({last[1] / last[0]:.0f}/s)"
        )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--retention", type=float, default=20)
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args()
    asyncio.run(run(args.seconds, args.retention, args.clients))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

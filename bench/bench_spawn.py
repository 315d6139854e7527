"""Spawn overhead: ``POST /jobs`` → 201 (child ready) vs starting the same child command directly.

Both paths run the same tiny runtime (a python script that prints its ready line at once) in the
same run; the direct path is ``asyncio.create_subprocess_exec`` + the first stdout line. Target:
roost adds ≤ 5 ms p50 and ≤ 10 ms p99 beyond the direct start.

Run: python bench/bench_spawn.py [--n 150]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import SERVER_CPU, make_registry, start_daemon, taskset

CHILD = """
import json, os, sys
name = sys.argv[1].split("@")[0]
sys.stdin.readline()
print(json.dumps({"session_id": "ses_" + os.urandom(8).hex(), "capsule_url": None}), flush=True)
if name == "short":
    import time; time.sleep(0.5)
elif name == "sleepy":
    import time; time.sleep(3600)
"""


def write_setup(tmp: Path, **extra: object) -> Path:
    (tmp / "child.py").write_text(CHILD)
    root = tmp / "registry"
    make_registry(root, {"quick": {}, "short": {}, "sleepy": {}})
    lines = [
        "[roost]",
        f'registry_path = "{root}"',
        f'state_dir = "{tmp / "state"}"',
        'spawn_allow = ["quick", "short", "sleepy"]',
        f'runtime_command = ["{sys.executable}", "-S", "{tmp / "child.py"}"]',
        "max_live_capsules = 100000",
        "stop_grace_secs = 2.0",
    ]
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    cfg = tmp / "roost.toml"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def pct(xs: list[float], p: int) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[p - 1]


# The direct baseline runs in its own small process pinned to the daemon's core, so both paths
# start the child from a comparable process on the same CPU.
DIRECT = """
import asyncio, json, sys, time
argv = json.loads(sys.argv[1])
async def main():
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, process_group=0)
        proc.stdin.close()
        await proc.stdout.readline()
        took = time.perf_counter() - t0
        await proc.wait()
        print(took, flush=True)
asyncio.run(main())
"""


async def main_async(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        cfg = write_setup(tmp)
        daemon = start_daemon(["--config", str(cfg)])
        argv = [sys.executable, "-S", str(tmp / "child.py"), "quick@0.1.0", "--workdir", tmpd, "--json"]
        roost: list[float] = []
        base: list[float] = []
        runner = await asyncio.create_subprocess_exec(
            *taskset(SERVER_CPU),
            sys.executable,
            "-c",
            DIRECT,
            json.dumps(argv),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert runner.stdin is not None and runner.stdout is not None

        async def direct() -> float:
            assert runner.stdin is not None and runner.stdout is not None
            runner.stdin.write(b"go\n")
            await runner.stdin.drain()
            return float(await runner.stdout.readline())

        try:
            async with aiohttp.ClientSession() as http:
                for i in range(n + 10):
                    t0 = time.perf_counter()
                    async with http.post(
                        daemon.url + "/jobs", json={"name": "quick", "version": "0.1.0", "task": "go"}
                    ) as resp:
                        assert resp.status == 201, await resp.text()
                        await resp.read()
                    r = time.perf_counter() - t0
                    b = await direct()
                    if i >= 10:  # warm-up
                        roost.append(r * 1000)
                        base.append(b * 1000)
                    await asyncio.sleep(0.02)
        finally:
            runner.stdin.close()
            await runner.wait()
            daemon.stop()
    over = [r - b for r, b in zip(roost, base, strict=True)]
    print(f"spawn overhead over {n} launches (ms)")
    print(f"  direct start → first line   p50 {statistics.median(base):7.2f}  p99 {pct(base, 99):7.2f}")
    print(f"  POST /jobs → 201           p50 {statistics.median(roost):7.2f}  p99 {pct(roost, 99):7.2f}")
    print(
        f"  roost adds (p50 of pairs)  p50 {statistics.median(over):7.2f}  "
        f"(p50 diff {statistics.median(roost) - statistics.median(base):.2f}, "
        f"p99 diff {pct(roost, 99) - pct(base, 99):.2f}); target ≤ 5 / ≤ 10"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=150)
    asyncio.run(main_async(ap.parse_args().n))


if __name__ == "__main__":
    main()

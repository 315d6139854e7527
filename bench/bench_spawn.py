"""Spawn overhead: ``POST /jobs`` → 201 (child ready) vs starting the same child command directly.

Two child kinds, each against its own baseline measured in the same run, rounds alternating:

* ``runtime``: a tiny external runtime (a python script that prints its ready line at once);
  the direct path is ``asyncio.create_subprocess_exec`` + the first stdout line. Target: roost
  adds ≤ 5 ms p50 and ≤ 10 ms p99 beyond the direct start.
* ``capsule host``: a script capsule under the real ``roost-capsule`` host, which binds its door,
  ``POST /register``s with its approval and only then prints its ready line, so registration is
  inside the measured path. The baseline starts the same host directly, with no daemon to
  register with (it then skips registration): the difference is what the daemon's launch and
  the registration round trip cost.

Run: python bench/bench_spawn.py [--n 150] [--n-host 40]
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
    make_registry(
        root,
        {
            "quick": {},
            "short": {},
            "sleepy": {},
            # A script capsule: run by roost-capsule, which registers before its ready line.
            "hosted": {"script": "import sys\nsys.stdin.read()\nprint('done')\n"},
        },
    )
    lines = [
        "[roost]",
        f'registry_path = "{root}"',
        f'state_dir = "{tmp / "state"}"',
        'spawn_allow = ["quick", "short", "sleepy", "hosted"]',
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
import asyncio, json, os, sys, time
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
        try:
            os.killpg(proc.pid, 9)  # a capsule host keeps serving its door: end it, untimed
        except ProcessLookupError:
            pass
        await proc.wait()
        print(took, flush=True)
asyncio.run(main())
"""


async def _direct_runner(argv: list[str], env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *taskset(SERVER_CPU),
        sys.executable,
        "-c",
        DIRECT,
        json.dumps(argv),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )


async def _direct(runner: asyncio.subprocess.Process) -> float:
    assert runner.stdin is not None and runner.stdout is not None
    runner.stdin.write(b"go\n")
    await runner.stdin.drain()
    return float(await runner.stdout.readline())


async def _pairs(
    http: aiohttp.ClientSession, url: str, name: str, runner: asyncio.subprocess.Process, n: int, *, cancel: bool
) -> tuple[list[float], list[float]]:
    """``n`` launches through roost and ``n`` direct starts, alternating (10 warm-up pairs dropped)."""
    roost: list[float] = []
    base: list[float] = []
    for i in range(n + 10):
        t0 = time.perf_counter()
        async with http.post(url + "/jobs", json={"name": name, "version": "0.1.0", "task": "go"}) as resp:
            assert resp.status == 201, await resp.text()
            job = await resp.json()
        r = time.perf_counter() - t0
        if cancel:  # untimed: a hosted capsule keeps its door open until told to stop
            async with http.post(url + f"/jobs/{job['job_id']}/cancel") as resp:
                await resp.read()
        b = await _direct(runner)
        if i >= 10:
            roost.append(r * 1000)
            base.append(b * 1000)
        await asyncio.sleep(0.02)
    return roost, base


def _report(title: str, roost: list[float], base: list[float], target: str) -> None:
    over = [r - b for r, b in zip(roost, base, strict=True)]
    print(f"{title}: {len(roost)} launches (ms), baseline in the same run")
    print(f"  direct start → first line   p50 {statistics.median(base):7.2f}  p99 {pct(base, 99):7.2f}")
    print(f"  POST /jobs → 201           p50 {statistics.median(roost):7.2f}  p99 {pct(roost, 99):7.2f}")
    print(
        f"  roost adds (p50 of pairs)  p50 {statistics.median(over):7.2f}  "
        f"(p50 diff {statistics.median(roost) - statistics.median(base):.2f}, "
        f"p99 diff {pct(roost, 99) - pct(base, 99):.2f}; "
        f"ratio p50 {statistics.median(roost) / statistics.median(base):.2f})"
        f"{target}"
    )


async def main_async(n: int, n_host: int) -> None:
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        cfg = write_setup(tmp)
        daemon = start_daemon(["--config", str(cfg)])
        quick = [sys.executable, "-S", str(tmp / "child.py"), "quick@0.1.0", "--workdir", tmpd, "--json"]
        hosted_wd = tmp / "direct-host"
        hosted_wd.mkdir()
        hosted = [sys.executable, "-m", "roost.capsule", "run", "hosted@0.1.0", "--workdir", str(hosted_wd), "--json"]
        host_env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
        host_env["MURMUR_REGISTRY_PATH"] = str(tmp / "registry")
        runners = [await _direct_runner(quick), await _direct_runner(hosted, host_env)]
        try:
            async with aiohttp.ClientSession() as http:
                quick_pair = await _pairs(http, daemon.url, "quick", runners[0], n, cancel=False)
                host_pair = await _pairs(http, daemon.url, "hosted", runners[1], n_host, cancel=True)
        finally:
            for runner in runners:
                assert runner.stdin is not None
                runner.stdin.close()
                await runner.wait()
            daemon.stop()
    _report("runtime (external)", *quick_pair, "; target ≤ 5 / ≤ 10")
    _report("capsule host (roost-capsule, registration included)", *host_pair, "")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--n-host", type=int, default=40)
    args = ap.parse_args()
    asyncio.run(main_async(args.n, args.n_host))


if __name__ == "__main__":
    main()

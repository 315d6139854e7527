"""Restart cost against history: time to ``/health`` and to the first ``/spawn``, and RSS after.

Each state dir holds one running orchestrator session (its credential is kept, so the first
``/spawn`` after the restart is a real one) plus 0, 10k or 100k ended sessions of history,
ended just now (so still inside the retention window: they are on disk, and a daemon that read
its history at start-up would pay for every one). Rounds alternate between the sizes, each
start from a fresh copy of the same state dir; the empty state dir is the same-run baseline.
Target: 100k within 1.2x of empty.

Run: python bench/bench_restart.py [--rounds 3] [--sizes 0,10000,100000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import SERVER_CPU, make_registry, post_json, start_daemon, taskset


def build_state(tmp: Path, registry: Path, history: int) -> tuple[Path, str]:
    """A state dir with one running session and ``history`` ended ones; returns it and the credential."""
    state = tmp / f"state-{history}"
    args = ["--registry-path", str(registry), "--spawn-allow", "orchestrator", "--state-dir", str(state)]
    daemon = start_daemon(args)
    try:
        sid = f"ses_{os.urandom(8).hex()}"
        cred = post_json(daemon.url + "/register", {"session_id": sid, "name": "orchestrator", "version": "0.1.0"})[
            "credential"
        ]
    finally:
        daemon.stop()
    db = sqlite3.connect(state / "roost.db")
    row = db.execute("SELECT * FROM sessions WHERE session_id = ?", (sid,)).fetchone()
    cols = [d[0] for d in db.execute("SELECT * FROM sessions LIMIT 0").description]
    now = int(time.time() * 1000)
    at = {c: i for i, c in enumerate(cols)}

    def ended(i: int) -> tuple[object, ...]:
        values = list(row)
        values[at["session_id"]] = f"ses_{i:016x}"
        values[at["status"]] = "complete"
        values[at["ended_ms"]] = now
        return tuple(values)

    marks = ",".join("?" * len(cols))
    db.executemany(f"INSERT INTO sessions VALUES ({marks})", (ended(i) for i in range(history)))
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return state, cred


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return int(resp.status)
    except (urllib.error.URLError, ConnectionError, OSError):
        return 0


def one_start(template: Path, registry: Path, cred: str, port: int) -> tuple[float, float, float]:
    run_dir = Path(tempfile.mkdtemp(prefix="roost-restart-"))
    state = run_dir / "state"
    shutil.copytree(template, state)
    os.chmod(state, 0o700)
    os.sync()  # the copy's dirty pages are written back now, not during the measured start
    cmd = [
        *taskset(SERVER_CPU),
        sys.executable,
        "-m",
        "roost",
        "--port",
        str(port),
        "--log-format",
        "json",
        "--registry-path",
        str(registry),
        "--spawn-allow",
        "orchestrator",
        "--state-dir",
        str(state),
    ]
    import subprocess

    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        while get(url + "/health") != 200:
            if proc.poll() is not None or time.monotonic() - t0 > 300:
                raise SystemExit("the daemon did not come up")
            time.sleep(0.005)
        health = time.monotonic() - t0
        body = json.dumps({"name": "worker", "version": "0.1.0"}).encode()
        while True:
            req = urllib.request.Request(
                url + "/spawn",
                data=body,
                method="POST",
                headers={"content-type": "application/json", "x-murmur-spawn-credential": cred},
            )
            try:
                with urllib.request.urlopen(req, timeout=5) as resp:
                    if resp.status == 200:
                        break
            except urllib.error.HTTPError as exc:
                raise SystemExit(f"/spawn answered {exc.code}: {exc.read()!r}") from None
        spawn = time.monotonic() - t0
        rss = psutil.Process(proc.pid).memory_info().rss / 2**20
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(run_dir, ignore_errors=True)
    return health, spawn, rss


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="0,10000,100000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        registry = tmp / "registry"
        registry.mkdir()
        make_registry(
            registry,
            {"orchestrator": {"capabilities": {"spawn": {"allow": ["worker"]}}}, "worker": {}},
        )
        states = {n: build_state(tmp, registry, n) for n in sizes}
        results: dict[int, list[tuple[float, float, float]]] = {n: [] for n in sizes}
        for r in range(args.rounds):
            for n in sizes if r % 2 == 0 else list(reversed(sizes)):
                template, cred = states[n]
                one = one_start(template, registry, cred, free_port())
                results[n].append(one)
                print(f"round {r + 1} history {n:>7}: /health {one[0]:.3f} s, 1st /spawn {one[1]:.3f} s", flush=True)
        base = sizes[0]

        def med(n: int, i: int) -> float:
            return statistics.median(x[i] for x in results[n])

        print(f"restart, median of {args.rounds} alternating rounds (baseline: {base} ended sessions, same run)")
        head = ("history", "/health s", "ratio", "1st /spawn s", "ratio", "RSS MiB", "ratio")
        print(" ".join(f"{h:>{w}}" for h, w in zip(head, (8, 10, 6, 13, 6, 8, 6), strict=True)))
        for n in sizes:
            h, s, m = med(n, 0), med(n, 1), med(n, 2)
            print(
                f"{n:>8} {h:>10.3f} {h / med(base, 0):>6.2f} {s:>13.3f} {s / med(base, 1):>6.2f}"
                f" {m:>8.1f} {m / med(base, 2):>6.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

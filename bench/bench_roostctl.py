#!/usr/bin/env python3
"""``roostctl status`` wall time against ``python -c pass`` in the same run (target: ≤ 4×).

Why a ratio: the machine is shared and noisy; interpreter start-up is the floor any Python CLI
pays, so the figure that means something is how much roostctl adds on top of it (imports,
argparse, one request over the admin socket, rendering). Uses hyperfine when installed, else N
interleaved runs of each, reporting median and p90.

    python bench/bench_roostctl.py [--runs 40] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "deploy" / "examples" / "registry"
TARGET = 4.0


def _start_daemon(state: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "roost", "--port", "0", "--state-dir", str(state), "--registry-path", str(EXAMPLES)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if (state / "admin.sock").exists() and _run(_ctl(state)) == 0:
            return proc
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the daemon did not start")


def _ctl(state: Path) -> list[str]:
    exe = Path(sys.executable).parent / "roostctl"
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "roost.ctl.main"]
    return [*base, "--state-dir", str(state), "status", "--json"]


def _run(cmd: list[str]) -> int:
    return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode


def _loop(cmds: dict[str, list[str]], runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(3):  # warm the page cache
        for cmd in cmds.values():
            _run(cmd)
    for _ in range(runs):
        for name, cmd in cmds.items():  # interleaved, so drift hits both equally
            t0 = time.perf_counter()
            rc = _run(cmd)
            times[name].append(time.perf_counter() - t0)
            if rc != 0:
                raise SystemExit(f"{name} failed with exit {rc}")
    return times


def _hyperfine(cmds: dict[str, list[str]], runs: int) -> dict[str, list[float]]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            [
                "hyperfine",
                "--warmup",
                "3",
                "--runs",
                str(runs),
                "-N",
                "--export-json",
                out.name,
                *(" ".join(c) for c in cmds.values()),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        data = json.loads(Path(out.name).read_text())
    return {name: r["times"] for name, r in zip(cmds, data["results"], strict=True)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-roostctl-") as tmp:
        state = Path(tmp) / "state"
        proc = _start_daemon(state)
        try:
            cmds = {"python -c pass": [sys.executable, "-c", "pass"], "roostctl status": _ctl(state)}
            tool = "hyperfine" if shutil.which("hyperfine") else "loop"
            times = _hyperfine(cmds, args.runs) if tool == "hyperfine" else _loop(cmds, args.runs)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    report: dict[str, object] = {"tool": tool, "runs": args.runs, "cpus": os.cpu_count()}
    for name, ts in times.items():
        ts = sorted(ts)
        report[name] = {
            "median_ms": round(statistics.median(ts) * 1000, 2),
            "p90_ms": round(ts[int(len(ts) * 0.9) - 1] * 1000, 2),
            "min_ms": round(ts[0] * 1000, 2),
        }
    base = statistics.median(times["python -c pass"])
    ratio = statistics.median(times["roostctl status"]) / base
    report["ratio_median"] = round(ratio, 2)
    report["target"] = TARGET
    report["ok"] = ratio <= TARGET
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name in cmds:
            r = report[name]
            assert isinstance(r, dict)
            print(f"{name:18} median {r['median_ms']:7.2f} ms   p90 {r['p90_ms']:7.2f} ms   min {r['min_ms']:7.2f} ms")
        print(f"ratio {ratio:.2f}x (target ≤ {TARGET}x) via {tool}: {'ok' if ratio <= TARGET else 'OVER TARGET'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())

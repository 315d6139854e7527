"""Referee throughput: ``POST /spawn`` granting approvals vs a bare aiohttp JSON handler.

Both servers run pinned to the same core in the same run; wrk (-t1 -c50) runs on the other
core. Target: roost >= 0.5x the bare handler's requests/s, p99 < 10 ms at 50 connections.
Every /spawn here is a real grant: credential verified, envelope compared, approval minted,
slot reserved and made durable in SQLite (group commit, synchronous=FULL).

Run: python bench/bench_referee.py [--seconds 8]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import BARE_JSON_SERVER, make_registry, post_json, start_daemon, start_script, wrk


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--connections", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "registry"
        make_registry(
            root,
            {
                "orchestrator": {"capabilities": {"spawn": {"allow": ["worker"]}, "network": {"allow": ["localhost"]}}},
                "worker": {"capabilities": {"network": {"allow": ["localhost:8080"]}}},
            },
        )
        daemon = start_daemon(
            [
                "--registry-path",
                str(root),
                "--state-dir",
                str(Path(tmp) / "state"),
                "--spawn-allow",
                "orchestrator",
                "--max-concurrent",
                "100000",
                "--max-live-capsules",
                "1000000",
            ]
        )
        bare = start_script(BARE_JSON_SERVER)
        try:
            cred = post_json(
                daemon.url + "/register", {"session_id": "ses_bench", "name": "orchestrator", "version": "0.1.0"}
            )["credential"]
            body = json.dumps({"name": "worker", "version": "0.1.0"})
            hdr = {"content-type": "application/json", "x-murmur-spawn-credential": cred}
            wrk(bare.url + "/spawn", method="POST", body=body, headers=hdr, seconds=2)  # warm-up
            wrk(daemon.url + "/spawn", method="POST", body=body, headers=hdr, seconds=2)
            b = wrk(
                bare.url + "/spawn",
                method="POST",
                body=body,
                headers=hdr,
                seconds=args.seconds,
                connections=args.connections,
            )
            r = wrk(
                daemon.url + "/spawn",
                method="POST",
                body=body,
                headers=hdr,
                seconds=args.seconds,
                connections=args.connections,
            )
        finally:
            daemon.stop()
            bare.stop()
    print(f"bare aiohttp JSON handler : {b.rps:9.0f} req/s  p50 {b.p50_ms:6.2f} ms  p99 {b.p99_ms:6.2f} ms")
    print(
        f"roost POST /spawn (grant) : {r.rps:9.0f} req/s  p50 {r.p50_ms:6.2f} ms  p99 {r.p99_ms:6.2f} ms"
        f"  non-2xx {r.non2xx}"
    )
    print(f"ratio roost/bare          : {r.rps / b.rps:9.2f}x  (target >= 0.5x; p99 target < 10 ms)")


if __name__ == "__main__":
    main()

"""Referee throughput: ``POST /spawn`` granting approvals vs a bare aiohttp JSON handler.

Both servers run pinned to the same core in the same run; wrk (-t1 -c50) runs on the other
core. Target: roost >= 0.5x the bare handler's requests/s, p99 < 10 ms at 50 connections.
Every /spawn here is a real grant: credential verified, envelope compared, approval minted,
slot reserved and journalled to SQLite behind the answer (roost/services/referee/reservelog.py). Requests take
the credentials of 8 orchestrators in turn; nothing is redeemed, so the pending table grows by
every grant of the run (about 400k slots after a minute), as a flood would make it. Rounds
alternate bare and roost; the median round and the median ratio are reported.

At 50 closed-loop connections p50 is about 50 / throughput, and p99 is 1.4-2x p50 on this kind
of machine, so the p99 target holds only with throughput to spare: roost answers about 10,000
req/s here (p50 about 4.9 ms). Stalls that grow with the pending table (a full collection walks
it; a quiet spell after a flood used to leave a backlog of expiries) show up in later rounds.

``--before PATH`` adds the daemon of another checkout (e.g. a ``git worktree`` of an earlier commit),
run from its sources with this interpreter, so a change is measured before/after in the same run;
the servers' order rotates every round, and each daemon's CPU per request (from ``/proc``) is printed.

``--instructions`` counts instead of timing: the daemon (and ``--before``'s) runs under valgrind's
callgrind and answers ``--small`` and then, in a second process, ``--large`` grants one at a time
over one kept-alive connection; the difference of the two totals over the difference of the
counts is what one ``/spawn`` costs the daemon (start-up, registration and shutdown cancel out).
The machine's load does not move it, so it tells a real change per request from noise.

Run: python bench/bench_referee.py [--seconds 5] [--rounds 3] [--before PATH]
     python bench/bench_referee.py --instructions [--small 500] [--large 2500] [--before PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (
    BARE_JSON_SERVER,
    WrkResult,
    callgrind_totals,
    make_registry,
    median_by,
    post_json,
    start_daemon,
    start_script,
    wrk,
)
from bench_door import cpu_secs
from bench_relay import _finish, _send_all

SESSIONS = 8
CREDENTIAL = "x-murmur-spawn-credential"


def daemon_args(root: Path, state: Path) -> list[str]:
    return [
        "--registry-path",
        str(root),
        "--state-dir",
        str(state),
        "--spawn-allow",
        "orchestrator",
        "--max-concurrent",
        "100000",
        "--max-live-capsules",
        "1000000",
    ]


def make_capsules(root: Path) -> None:
    make_registry(
        root,
        {
            "orchestrator": {"capabilities": {"spawn": {"allow": ["worker"]}, "network": {"allow": ["localhost"]}}},
            "worker": {"capabilities": {"network": {"allow": ["localhost:8080"]}}},
        },
    )


def callgrind_spawns(tmp: Path, root: Path, n: int, tree: str | None) -> int:
    """The instructions a daemon executes from its start to its end, granting ``n`` spawns."""
    run = tmp / f"{'before' if tree else 'roost'}-{n}"
    run.mkdir()
    out = run / "callgrind.out"
    grind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    daemon = start_daemon(daemon_args(root, run / "state"), cpu="0-1", prefix=grind, timeout=600, tree=tree)
    try:
        cred = post_json(
            daemon.url + "/register", {"session_id": "ses_bench0", "name": "orchestrator", "version": "0.1.0"}
        )["credential"]
        body = json.dumps({"name": "worker", "version": "0.1.0"})
        _send_all(daemon.port, "/spawn", body, {"content-type": "application/json", CREDENTIAL: cred}, n)
    finally:
        _finish(daemon.proc)
    return callgrind_totals(out)


def instructions(before: str | None, small: int, large: int) -> None:
    """Instructions per ``/spawn`` of this checkout's daemon (and ``before``'s), by callgrind."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    if large <= small:
        raise SystemExit("--large must be more requests than --small")
    trees: dict[str, str | None] = {"roost": None, **({"before": before} if before else {})}
    per: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        root = tmp / "registry"
        make_capsules(root)
        for name, tree in trees.items():
            low, high = (callgrind_spawns(tmp, root, n, tree) for n in (small, large))
            per[name] = (high - low) / (large - small)
            print(f"  {name:7}: {low:,} instructions for {small} grants, {high:,} for {large}", flush=True)
    for name, count in per.items():
        print(f"{name:7} : {count / 1000:8.1f}k instructions per /spawn")
    if before:
        print(f"this/before (instructions): {per['roost'] / per['before']:5.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--before", help="another checkout whose daemon is measured in the same run, rounds rotating")
    ap.add_argument("--instructions", action="store_true", help="instructions per /spawn, counted by callgrind")
    ap.add_argument("--small", type=int, default=500, help="--instructions: grants in the first count")
    ap.add_argument("--large", type=int, default=2500, help="--instructions: grants in the second count")
    args = ap.parse_args()
    if args.instructions:
        instructions(args.before, args.small, args.large)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "registry"
        make_capsules(root)
        daemon = start_daemon(daemon_args(root, Path(tmp) / "state"))
        before = None
        if args.before:
            before = start_daemon(daemon_args(root, Path(tmp) / "state-before"), tree=args.before)
        bare = start_script(BARE_JSON_SERVER)
        servers = [("bare", bare)] + [("roost", daemon)] + ([("before", before)] if before is not None else [])
        results: dict[str, list[WrkResult]] = {name: [] for name, _ in servers}
        cpu_per_req: dict[str, list[float]] = {name: [] for name, _ in servers}
        try:
            body = json.dumps({"name": "worker", "version": "0.1.0"})
            hdr = {"content-type": "application/json"}
            rots = {}
            for name, srv in servers:
                # Several orchestrators, one credential per request in turn: a few seconds of grants
                # at this rate would otherwise fill one session's --max-concurrent (at most 100000).
                creds = (
                    [
                        post_json(
                            srv.url + "/register",
                            {"session_id": f"ses_bench{i}", "name": "orchestrator", "version": "0.1.0"},
                        )["credential"]
                        for i in range(SESSIONS)
                    ]
                    if name != "bare"
                    else ["x"] * SESSIONS
                )
                rots[name] = (CREDENTIAL, creds)
                wrk(srv.url + "/spawn", method="POST", body=body, headers=hdr, seconds=2, rotate=rots[name])  # warm-up
            for r in range(args.rounds):  # rotate, so drift on a shared machine hits every server alike
                for name, srv in servers[r % len(servers) :] + servers[: r % len(servers)]:
                    cpu0 = cpu_secs(srv.proc.pid)
                    res = wrk(
                        srv.url + "/spawn",
                        method="POST",
                        body=body,
                        headers=hdr,
                        seconds=args.seconds,
                        connections=args.connections,
                        rotate=rots[name],
                    )
                    results[name].append(res)
                    cpu_per_req[name].append((cpu_secs(srv.proc.pid) - cpu0) / max(res.rps * args.seconds, 1) * 1e6)
        finally:
            for _, srv in servers:
                srv.stop()
    bares, roosts = results["bare"], results["roost"]
    for i, (b, r) in enumerate(zip(bares, roosts, strict=True), 1):
        print(
            f"round {i}: bare {b.rps:7.0f} req/s p99 {b.p99_ms:5.2f} ms | roost {r.rps:7.0f} req/s "
            f"p50 {r.p50_ms:5.2f} ms p99 {r.p99_ms:5.2f} ms non-2xx {r.non2xx} | ratio {r.rps / b.rps:4.2f}x"
        )
    b, r = median_by(bares, "rps"), median_by(roosts, "rps")
    ratio = statistics.median(r.rps / b.rps for b, r in zip(bares, roosts, strict=True))
    print(
        f"bare aiohttp JSON handler : {b.rps:9.0f} req/s  p50 {b.p50_ms:6.2f} ms  p99 {b.p99_ms:6.2f} ms"
        "  (median round)"
    )
    print(
        f"roost POST /spawn (grant) : {r.rps:9.0f} req/s  p50 {r.p50_ms:6.2f} ms  p99 {r.p99_ms:6.2f} ms"
        f"  (median round)"
    )
    print(
        f"ratio roost/bare          : {ratio:9.2f}x  median of {args.rounds} rounds"
        "  (target >= 0.5x; p99 target < 10 ms)"
    )
    print(f"roost CPU per request     : {statistics.median(cpu_per_req['roost']):9.1f} us (median round)")
    if "before" in results:
        old = median_by(results["before"], "rps")
        old_ratio = statistics.median(o.rps / b.rps for b, o in zip(bares, results["before"], strict=True))
        print(
            f"before ({args.before}) : {old.rps:9.0f} req/s  p50 {old.p50_ms:6.2f} ms  p99 {old.p99_ms:6.2f} ms"
            f"  ratio to bare {old_ratio:4.2f}x  CPU per request {statistics.median(cpu_per_req['before']):.1f} us"
        )
        per_round = [round(r.rps / o.rps, 2) for r, o in zip(roosts, results["before"], strict=True)]
        print(f"roost/before per round    : {per_round}  median {statistics.median(per_round):.2f}")


if __name__ == "__main__":
    main()

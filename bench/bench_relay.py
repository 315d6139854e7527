"""Relay overhead: client → roost ``POST /a2a/send`` → door, against client → door directly.

Same run, same door: a real ``a2a.door.Door`` (instant runner) on core 0 next to the daemon,
wrk on the other core with one connection (-c1), so p50 is the round-trip latency of one
request at a time. Every relayed send is the full path: credential verified, network.allow
checked, traceparent/trust stamped, the peer's Task parsed, ``a2a_send`` appended to the
sender's trace.jsonl. Target: p50(relay) / p50(direct) <= 1.5.

Run: python bench/bench_relay.py [--seconds 8]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import make_registry, post_json, start_daemon, start_script, wrk
from bench_door import DOOR_SERVER


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--connections", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "registry"
        make_registry(root, {"sender": {"capabilities": {"network": {"allow": ["127.0.0.1"]}}}})
        workdir = Path(tmp) / "work"
        workdir.mkdir()
        daemon = start_daemon(
            ["--registry-path", str(root), "--state-dir", str(Path(tmp) / "state"), "--spawn-allow", "sender"]
        )
        door = start_script(DOOR_SERVER)
        try:
            cred = post_json(
                daemon.url + "/register",
                {"session_id": "ses_bench", "name": "sender", "version": "0.1.0", "workdir": str(workdir)},
            )["credential"]
            direct_body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": "req_1",
                    "method": "message/send",
                    "params": {"message": {"messageId": "msg-1", "role": "user", "parts": [{"text": "hello"}]}},
                }
            )
            direct_hdr = {
                "content-type": "application/json",
                "x-murmur-task-origin": "peer",
                "x-murmur-task-trust": "trusted",
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            }
            relay_body = json.dumps({"peer_url": door.url, "text": "hello", "message_id": "msg-1"})
            relay_hdr = {"content-type": "application/json", "x-murmur-spawn-credential": cred}
            wrk(door.url + "/", method="POST", body=direct_body, headers=direct_hdr, seconds=2)  # warm-up
            wrk(daemon.url + "/a2a/send", method="POST", body=relay_body, headers=relay_hdr, seconds=2)
            d = wrk(
                door.url + "/",
                method="POST",
                body=direct_body,
                headers=direct_hdr,
                seconds=args.seconds,
                connections=args.connections,
            )
            r = wrk(
                daemon.url + "/a2a/send",
                method="POST",
                body=relay_body,
                headers=relay_hdr,
                seconds=args.seconds,
                connections=args.connections,
            )
            lines = len((workdir / ".murmur" / "ses_bench" / "trace.jsonl").read_text().splitlines())
        finally:
            daemon.stop()
            door.stop()
    print(f"client -> door           : p50 {d.p50_ms:6.3f} ms  p99 {d.p99_ms:6.3f} ms  {d.rps:7.0f} req/s")
    print(
        f"client -> roost -> door  : p50 {r.p50_ms:6.3f} ms  p99 {r.p99_ms:6.3f} ms  {r.rps:7.0f} req/s"
        f"  non-2xx {r.non2xx}  a2a_send lines {lines}"
    )
    ratio = r.p50_ms / d.p50_ms
    print(f"p50 ratio relay/direct   : {ratio:6.2f}  (target <= 1.5: {'met' if ratio <= 1.5 else 'NOT met'})")


if __name__ == "__main__":
    main()

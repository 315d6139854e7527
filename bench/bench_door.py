"""Door throughput: ``message/send`` answered by an ``a2a.door.Door`` pinned to one core.

The door runs in its own process on core 0 with an instant runner (the benchmark measures the
door — parse, classify, admit, answer — not a capsule's work); wrk (-t1 -c50) runs on the other
core. Every request is a real admission: a task is minted, queued, run and retired.
Target: >= 2,000 message/send per second on one core.

Run: python bench/bench_door.py [--seconds 8]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import app_script, start_script, wrk

DOOR_SERVER = app_script(
    """
    from a2a.door import Door, TaskOutcome

    async def runner(task):
        return TaskOutcome.completed("ok")

    def build_app():
        return Door(name="bench", version="0.1.0", session_id="ses_bench", runner=runner,
                    queue_depth=10000, peer_tasks_accept=True).app
    """
)

BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "req_1",
        "method": "message/send",
        "params": {"message": {"messageId": "msg-1", "role": "user", "parts": [{"text": "hello door"}]}},
    }
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--connections", type=int, default=50)
    args = ap.parse_args()
    door = start_script(DOOR_SERVER)
    hdr = {"content-type": "application/json", "x-murmur-task-origin": "peer", "x-murmur-task-trust": "trusted"}
    try:
        wrk(door.url + "/", method="POST", body=BODY, headers=hdr, seconds=2)  # warm-up
        r = wrk(
            door.url + "/", method="POST", body=BODY, headers=hdr, seconds=args.seconds, connections=args.connections
        )
    finally:
        door.stop()
    print(
        f"door message/send (1 core): {r.rps:9.0f} req/s  p50 {r.p50_ms:6.2f} ms  p99 {r.p99_ms:6.2f} ms"
        f"  non-2xx {r.non2xx}"
    )
    print(f"target >= 2000 req/s      : {'met' if r.rps >= 2000 else 'NOT met'}")


if __name__ == "__main__":
    main()

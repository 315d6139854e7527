"""List jobs, optionally of one state.

Calls ``GET /jobs[?state=starting|running|complete|failed|crashed|terminated]``;
``--json`` prints ``{"jobs": [...]}``.
"""

from __future__ import annotations

import argparse

from roost.ctl.context import Context
from roost.ctl.output import fmt_ms
from roost.wire import JOB_STATES

NAME = "jobs"
HELP = "list jobs"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state", choices=JOB_STATES)


def run(ctx: Context, args: argparse.Namespace) -> int:
    path = "/jobs" + (f"?state={args.state}" if args.state else "")
    body = ctx.client.call("GET", path)
    out = ctx.out
    if out.as_json:
        out.json(body)
        return 0
    out.table(
        body["jobs"],
        [
            ("job", lambda r: r.get("job_id")),
            ("capsule", lambda r: f"{r.get('name')}@{r.get('version')}"),
            ("state", lambda r: r.get("state")),
            ("session", lambda r: r.get("session_id")),
            ("parent", lambda r: r.get("parent_session_id") or r.get("parent_id")),
            ("started", lambda r: fmt_ms(r.get("created_ms"))),
        ],
        empty="no jobs" + (f" in state {args.state}" if args.state else ""),
    )
    return 0

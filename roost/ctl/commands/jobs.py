"""List jobs, optionally of one state.

Calls ``GET /jobs[?state=starting|running|complete|failed|crashed|terminated]``;
``--json`` prints ``{"jobs": [...]}``.
"""

from __future__ import annotations

import argparse

from roost.core.wire import JOB_STATES
from roost.ctl.context import Context
from roost.ctl.output import fmt_age, fmt_when

NAME = "jobs"
HELP = "list jobs"
DESCRIPTION = "List every job the daemon knows, oldest first; --state keeps one state."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state", choices=JOB_STATES, help="only jobs in this state (" + ", ".join(JOB_STATES) + ")")


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
            ("started", lambda r: fmt_when(r.get("created_ms"))),
            ("age", lambda r: fmt_age(r.get("created_ms"))),
            ("session", lambda r: r.get("session_id")),
            ("parent", lambda r: r.get("parent_session_id")),
            ("node", lambda r: (r.get("node") or {}).get("node_id", "")[:12] or None),
        ],
        empty="no jobs" + (f" in state {args.state}" if args.state else ""),
        optional=("session", "parent", "node"),
        keep=("job", "session", "parent"),
    )
    return 0

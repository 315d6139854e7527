"""List jobs, optionally of one state.

Calls ``GET /jobs[?state=starting|running|complete|failed|crashed|terminated]``;
``--json`` prints ``{"jobs": [...]}``.
"""

from __future__ import annotations

import argparse

from roost.core.admin_models import JobList, JobView
from roost.core.wire import JOB_STATES
from roost.ctl.context import Context
from roost.ctl.output import fmt_age, fmt_when

NAME = "jobs"
HELP = "list jobs"
DESCRIPTION = "List every job the daemon knows, oldest first; --state keeps one state."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state", choices=JOB_STATES, help="only jobs in this state (" + ", ".join(JOB_STATES) + ")")


def _node_id(job: JobView) -> str | None:
    node = job["node"]
    return node["node_id"][:12] or None if node is not None else None


def run(ctx: Context, args: argparse.Namespace) -> int:
    path = "/jobs" + (f"?state={args.state}" if args.state else "")
    body: JobList = ctx.client.call("GET", path)
    out = ctx.out
    if out.as_json:
        out.json(body)
        return 0
    out.table(
        body["jobs"],
        [
            ("job", lambda r: r["job_id"]),
            ("capsule", lambda r: f"{r['name']}@{r['version']}"),
            ("state", lambda r: r["state"]),
            ("started", lambda r: fmt_when(r["created_ms"])),
            ("age", lambda r: fmt_age(r["created_ms"])),
            ("session", lambda r: r["session_id"]),
            ("parent", lambda r: r["parent_session_id"]),
            ("node", _node_id),
        ],
        empty="no jobs" + (f" in state {args.state}" if args.state else ""),
        optional=("session", "parent", "node"),
        keep=("job", "session", "parent"),
    )
    return 0

"""List sessions (default: running ones).

Calls ``GET /sessions?state=running|complete|failed|all``; ``--json`` prints ``{"sessions": [...]}``.
With an id, calls ``GET /sessions/{id}`` and prints that session.
"""

from __future__ import annotations

import argparse

from roost.ctl.client import quote_id
from roost.ctl.context import Context
from roost.ctl.output import fmt_ms

NAME = "sessions"
HELP = "list sessions, or show one"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session_id", nargs="?", help="show this session")
    p.add_argument("--state", choices=("running", "complete", "failed", "all"), default="running")
    p.add_argument("--all", action="store_true", help="same as --state all")


def run(ctx: Context, args: argparse.Namespace) -> int:
    out = ctx.out
    if args.session_id:
        one = ctx.client.call("GET", f"/sessions/{quote_id(args.session_id)}")
        if out.as_json:
            out.json(one)
        else:
            out.pairs((k, fmt_ms(v) if k.endswith("_ms") else v) for k, v in one.items())
        return 0
    state = "all" if args.all else args.state
    body = ctx.client.call("GET", f"/sessions?state={state}")
    if out.as_json:
        out.json(body)
        return 0
    out.table(
        body["sessions"],
        [
            ("session", lambda r: r["session_id"]),
            ("capsule", lambda r: f"{r['name']}@{r['version']}"),
            ("status", lambda r: r["status"]),
            ("parent", lambda r: r.get("parent_id")),
            ("kids", lambda r: r.get("live_children")),
            ("trust", lambda r: r.get("trust")),
            ("job", lambda r: r.get("job_id")),
            ("started", lambda r: fmt_ms(r.get("created_ms"))),
        ],
        empty=f"no {state if state != 'all' else ''} sessions".replace("  ", " "),
    )
    return 0

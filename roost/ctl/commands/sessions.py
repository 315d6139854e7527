"""List sessions (default: running ones), or show one.

Calls ``GET /sessions?state=running|complete|failed|all``; ``--json`` prints ``{"sessions": [...]}``.
With an id, calls ``GET /sessions/{id}`` and prints that session. ``sessions end ID [--reason
TEXT]`` calls ``POST /sessions/{id}/end``: the session ends (failed, with the reason recorded),
its children's lifelines close; exit 1 if it is unknown or already ended.
"""

from __future__ import annotations

import argparse

from roost.core.admin_models import SessionDetail, SessionList, SessionView
from roost.core.wire import SESSION_STATES
from roost.ctl.client import quote_id
from roost.ctl.context import Context
from roost.ctl.errors import Usage
from roost.ctl.output import fmt_ms, fmt_when, label_of

NAME = "sessions"
HELP = "list sessions, or show one"
DESCRIPTION = (
    "List sessions (running ones unless --state or --all says otherwise) with their workdirs,\n"
    "or show one session in full, or end one: roostctl sessions end ID [--reason TEXT]."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session_id", nargs="?", metavar="SESSION_ID", help="show this session (ses_…), or 'end'")
    p.add_argument("target", nargs="?", metavar="ID", help="with 'end': the session to end")
    p.add_argument("--reason", help="with 'end': why (recorded with the session; default 'ended by the operator')")
    p.add_argument(
        "--state",
        choices=(*SESSION_STATES, "all"),
        default="running",
        help="which sessions to list (default: running)",
    )
    p.add_argument("--all", action="store_true", help="every session, ended ones too (same as --state all)")


def run(ctx: Context, args: argparse.Namespace) -> int:
    out = ctx.out
    if args.session_id == "end":
        if not args.target:
            raise Usage("sessions end needs a session id: roostctl sessions end ID [--reason TEXT]")
        body = {"reason": args.reason} if args.reason else {}
        ended: SessionView = ctx.client.call("POST", f"/sessions/{quote_id(args.target)}/end", body)
        if out.as_json:
            out.json(ended)
        else:
            out.pairs((k, fmt_ms(v) if k.endswith("_ms") else v) for k, v in ended.items())
        return 0
    if args.target or args.reason:
        raise Usage("only 'roostctl sessions end ID' takes a second id or --reason")
    if args.session_id:
        one: SessionDetail = ctx.client.call("GET", f"/sessions/{quote_id(args.session_id)}")
        if out.as_json:
            out.json(one)
        else:
            rows: list[tuple[str, object]] = [("capsule", f"{one['name']}@{one['version']}")]
            rows += [
                (label_of(k), fmt_ms(v) if k.endswith("_ms") else ", ".join(v) if isinstance(v, list) else v)
                for k, v in one.items()
                if k not in ("name", "version")
            ]
            out.pairs(rows)
        return 0
    state = "all" if args.all else args.state
    listed: SessionList = ctx.client.call("GET", f"/sessions?state={state}")
    if out.as_json:
        out.json(listed)
        return 0
    out.table(
        listed["sessions"],
        [
            ("session", lambda r: r["session_id"]),
            ("capsule", lambda r: f"{r['name']}@{r['version']}"),
            ("status", lambda r: r["status"]),
            ("started", lambda r: fmt_when(r["created_ms"])),
            ("workdir", lambda r: r["workdir"]),
            ("parent", lambda r: r["parent_id"]),
            ("job", lambda r: r["job_id"]),
            ("kids", lambda r: r["live_children"]),
            ("trust", lambda r: r["trust"]),
            ("why ended", lambda r: r["end_reason"]),
        ],
        empty=f"no {state if state != 'all' else ''} sessions".replace("  ", " "),
        optional=("started", "workdir", "parent", "job", "kids", "trust", "why ended"),
        keep=("session", "parent", "job"),
    )
    return 0

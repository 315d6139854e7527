"""Drain: refuse new spawns and launches, let running work finish, then stop the daemon.

Calls ``POST /drain`` (``{"timeout_secs"?}`` from ``--deadline SECS``; after it the daemon stops anyway and its
stop winds the remaining children down). With ``--wait`` roostctl waits until the daemon is gone.
``--json`` prints ``{draining, already_draining, running_sessions, active_jobs}``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from roost.ctl.context import Context
from roost.ctl.errors import CtlError, Unreachable

NAME = "drain"
HELP = "finish running work, then stop the daemon"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--deadline", dest="drain_timeout", type=float, metavar="SECS", help="stop anyway after SECS")
    p.add_argument("--wait", action="store_true", help="wait until the daemon has stopped")


def run(ctx: Context, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.drain_timeout is not None:
        body["timeout_secs"] = args.drain_timeout
    answer = ctx.client.call("POST", "/drain", body)
    out = ctx.out
    if not out.as_json:
        out.info(
            f"draining: {answer.get('running_sessions', 0)} running sessions and {answer.get('active_jobs', 0)} "
            "active jobs to finish; no new spawns are granted; the daemon stops when they are done"
        )
    if args.wait:
        while True:
            try:
                ctx.client.call("GET", "/livez")
            except Unreachable:
                break
            except CtlError:
                pass
            time.sleep(0.2)
        if not out.as_json:
            out.info("the daemon has stopped")
        answer["stopped"] = True
    if out.as_json:
        out.json(answer)
    return 0

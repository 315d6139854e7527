"""Drain: refuse new spawns and launches, let running work finish, then stop the daemon.

Calls ``POST /drain`` (``{"timeout_secs"?}`` from ``--deadline SECS``; after it the daemon stops
anyway and its stop winds the remaining children down; on a daemon already draining the earlier
deadline wins). With ``--wait`` roostctl polls ``GET /drain`` and shows what the daemon still
waits for — a live count and each job with the command that ends it — until the daemon is gone.
``--json`` prints ``{draining, already_draining, running_sessions, active_jobs, deadline_in_secs,
jobs, stopped?}``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from roost.core.admin_models import DrainAnswer, DrainStatus
from roost.ctl.context import Context
from roost.ctl.errors import CtlError, Unreachable
from roost.ctl.output import fmt_age

NAME = "drain"
HELP = "finish running work, then stop the daemon"
DESCRIPTION = (
    "Stop taking new work, let running jobs finish, then stop the daemon. --wait shows what it\n"
    "is still waiting for (each job with the command that ends it); --deadline stops it anyway."
)
POLL_SECS = 0.5
REMIND_SECS = 15.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--deadline", dest="drain_timeout", type=float, metavar="SECS", help="stop anyway after SECS seconds"
    )
    p.add_argument("--wait", action="store_true", help="wait until the daemon has stopped, showing what is left")


def _waiting(ctx: Context, status: DrainStatus) -> list[str]:
    jobs = status["jobs"]
    left = status["deadline_in_secs"]
    stop = f"; it stops anyway in {left:.0f}s" if isinstance(left, (int, float)) else ""
    if not jobs:
        return [f"draining: {status['running_sessions']} session(s) still running{stop}"]
    lines = [f"draining: waiting for {len(jobs)} job(s){stop}"]
    width = max(len(f"{j['name']}@{j['version']}") for j in jobs)
    for j in jobs:
        capsule = f"{j['name']}@{j['version']}".ljust(width)
        lines.append(f"  {j['job_id']}  {capsule}  {j['state']} for {fmt_age(j['created_ms'])}")
        lines.append(f"    end it: roostctl cancel {j['job_id']}")
    return lines


def _wait(ctx: Context) -> None:
    out = ctx.out
    shown: tuple[object, ...] | None = None
    last_print = 0.0
    while True:
        try:
            status: DrainStatus = ctx.client.call("GET", "/drain")
        except Unreachable:
            return
        except CtlError:
            time.sleep(POLL_SECS)
            continue
        key = (status["running_sessions"], tuple(j["job_id"] for j in status["jobs"]))
        now = time.monotonic()
        if not out.as_json and (key != shown or now - last_print >= REMIND_SECS):
            if any(key[1]) or key[0]:
                for line in _waiting(ctx, status):
                    out.info(line)
            else:
                out.info("draining: nothing left to wait for; the daemon is stopping")
            shown, last_print = key, now
        time.sleep(POLL_SECS)


def run(ctx: Context, args: argparse.Namespace) -> int:
    body: dict[str, object] = {}
    if args.drain_timeout is not None:
        body["timeout_secs"] = args.drain_timeout
    answer: DrainAnswer = ctx.client.call("POST", "/drain", body)
    out = ctx.out
    if not out.as_json:
        again = "already draining; " if answer["already_draining"] else ""
        out.info(
            f"{again}no new spawns are granted; {answer['active_jobs']} job(s) and "
            f"{answer['running_sessions']} session(s) to finish, then the daemon stops"
        )
        if not args.wait:
            for line in _waiting(ctx, answer)[1:]:
                out.info(line)
    if args.wait:
        _wait(ctx)
        if not out.as_json:
            out.info("the daemon has stopped")
    printed: dict[str, Any] = {**answer, "stopped": True} if args.wait else {**answer}
    if out.as_json:
        out.json(printed)
    return 0

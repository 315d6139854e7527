"""Launch a capsule top-level, on the operator's behalf (``--spawn-allow`` still decides).

Calls ``POST /jobs`` with ``{name, version, task, workdir?, deadline_secs?}`` and prints the job
(201). With ``--wait`` it then polls ``GET /jobs/{id}`` and reports progress on stderr (state
changes, delegations started under it) until the job ends; exit 0 when it completed, 1 when it
failed, crashed or was terminated. ``--json`` prints only the final job object.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from roost.ctl.client import quote_id
from roost.ctl.commands.job import show
from roost.ctl.context import Context
from roost.ctl.errors import CtlError, Usage

NAME = "spawn"
HELP = "launch a capsule top-level"
TERMINAL = {"complete", "failed", "crashed", "terminated"}
POLL_SECS = 0.5


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name")
    p.add_argument("version")
    p.add_argument("--task", help="task text ('-' reads it from stdin)")
    p.add_argument("--workdir", help="absolute working directory for the session")
    p.add_argument("--deadline", type=float, metavar="SECS", help="deadline_secs of the job")
    p.add_argument("--wait", action="store_true", help="wait for the job to end, with progress on stderr")


def _count(nodes: list[dict[str, Any]]) -> int:
    return sum(1 + _count(n.get("children", [])) for n in nodes)


def _find(nodes: list[dict[str, Any]], session_id: str) -> dict[str, Any] | None:
    for n in nodes:
        if n.get("session_id") == session_id:
            return n
        hit = _find(n.get("children", []), session_id)
        if hit is not None:
            return hit
    return None


def wait(ctx: Context, job: dict[str, Any]) -> dict[str, Any]:
    job_id = str(job["job_id"])
    started = time.monotonic()
    last_state = None
    last_kids = 0
    while True:
        state = job.get("state")
        elapsed = time.monotonic() - started
        if state != last_state:
            ctx.out.info(f"[{elapsed:6.1f}s] {job_id} {state}")
            last_state = state
        if state in TERMINAL:
            return job
        sid = job.get("session_id")
        if isinstance(sid, str):
            try:
                roots = ctx.client.call("GET", "/tree?state=all")["roots"]
                node = _find(roots, sid)
                kids = _count(node.get("children", [])) if node else 0
            except CtlError:
                kids = last_kids
            if kids != last_kids:
                ctx.out.info(f"[{elapsed:6.1f}s] {job_id} {kids} delegation(s) below it")
                last_kids = kids
        time.sleep(POLL_SECS)
        job = ctx.client.call("GET", f"/jobs/{quote_id(job_id)}")


def run(ctx: Context, args: argparse.Namespace) -> int:
    if args.task is None:
        raise Usage("--task is required (use --task - to read it from stdin)")
    task = sys.stdin.read() if args.task == "-" else args.task
    body: dict[str, Any] = {"name": args.name, "version": args.version, "task": task}
    if args.workdir:
        body["workdir"] = args.workdir
    if args.deadline is not None:
        body["deadline_secs"] = args.deadline
    job = ctx.client.call("POST", "/jobs", body)
    if not args.wait:
        show(ctx, job)
        return 0
    if not ctx.out.as_json:
        ctx.out.info(f"launched {job.get('job_id')} ({args.name}@{args.version}); waiting")
    final = wait(ctx, job)
    show(ctx, final)
    return 0 if final.get("state") == "complete" else 1

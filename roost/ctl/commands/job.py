"""Show one job: its capsule, state, node, times, how it ended and its completion record.

Calls ``GET /jobs/{id}``; ``--json`` prints the job object as the daemon answered it. The result
files of a child on this host are listed here; a child on another node has them there, and the
daemon lists them (``out_files``, read through the node's keeper).
"""

from __future__ import annotations

import argparse
import os

from roost.core.admin_models import JobView, NodeView
from roost.ctl.client import quote_id
from roost.ctl.context import Context
from roost.ctl.output import fmt_age, fmt_ms

NAME = "job"
HELP = "show one job, with its completion once it ended"
DESCRIPTION = "Show one job: its capsule, state, times, and how it ended (its completion record)."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", metavar="JOB_ID", help="the job (job_…), as 'roostctl jobs' lists it")


def _when(ms: int | None) -> str:
    return "-" if not isinstance(ms, int) else f"{fmt_ms(ms)} ({fmt_age(ms)} ago)"


def _node(node: NodeView | None) -> str:
    """Where the child runs: a cluster node's id and address, or this host."""
    if node is None:
        return "this host"
    return f"{node['node_id']} ({node['address'] or 'address unknown'})"


def _result_files(workdir: str) -> list[str]:
    """The task's output files (``out/``), when this user can see them (roostctl runs on the host)."""
    if not workdir:
        return []
    out = os.path.join(workdir, "out")
    try:
        return [os.path.join(out, n) for n in sorted(os.listdir(out))]
    except OSError:
        return []


def show(ctx: Context, body: JobView) -> None:
    out = ctx.out
    if out.as_json:
        out.json(body)
        return
    rows: list[tuple[str, object]] = [
        ("job", body["job_id"]),
        ("capsule", f"{body['name']}@{body['version']}"),
        ("state", out.state(body["state"])),
        ("session", body["session_id"]),
        ("parent session", body["parent_session_id"] or "- (top-level)"),
        ("delegation", body["delegation_id"]),
        ("workdir", body["workdir"]),
        ("node", _node(body["node"])),
        ("capsule url", body["capsule_url"]),
        ("created", _when(body["created_ms"])),
        ("ready", _when(body["ready_ms"])),
        ("ended", _when(body["ended_ms"])),
    ]
    if body["ended_ms"] is not None:
        rows += [("exit", body["exit_status"]), ("outcome", body["outcome"]), ("reason", body["reason"])]
    comp = body["completion"]
    if isinstance(comp, dict):
        dur = comp.get("duration_ms")
        summary = f"{comp.get('status')}, reported by {comp.get('reported_by')}"
        if isinstance(dur, int):
            summary += f", after {dur / 1000:.1f}s"
        summary += ", delivered to the parent" if comp.get("delivered") else ", not delivered (no parent to tell)"
        rows.append(("completion", summary))
        if comp.get("detail"):
            rows.append(("  detail", comp.get("detail")))
    elif body["ended_ms"] is not None:
        rows.append(("completion", "none recorded"))
    # A child on another node: its node listed them (relative to its workdir there).
    remote = body.get("out_files")
    files = list(remote) if remote is not None else _result_files(body["workdir"])
    if files:
        rows.append(("result files", files[0]))
        rows += [("", f) for f in files[1:]]
    out.pairs(rows)


def run(ctx: Context, args: argparse.Namespace) -> int:
    job: JobView = ctx.client.call("GET", f"/jobs/{quote_id(args.job_id)}")
    show(ctx, job)
    return 0

"""The delegation tree: sessions under their parents, with each job's state.

Calls ``GET /tree?state=running|all`` (default: running sessions with their family);
``--json`` prints ``{"roots": [{session_id, name, version, status, trust, job_id, job_state?,
outcome?, reason?, created_ms, ended_ms, end_reason, depth, children: [...]}]}``.
"""

from __future__ import annotations

import argparse

from roost.core.admin_models import TreeAnswer, TreeNode
from roost.ctl.context import Context
from roost.ctl.output import fmt_age

NAME = "tree"
HELP = "the delegation tree, with each job's state"
DESCRIPTION = (
    "Show running top-level sessions with the capsules they delegated to, each with its state\n"
    "(the job's when it has one: a cancelled job is 'terminated') and its age. --all also shows\n"
    "sessions that ended."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all", action="store_true", help="include sessions that ended")


def _count(nodes: list[TreeNode]) -> int:
    return sum(1 + _count(n["children"]) for n in nodes)


def node_state(node: TreeNode) -> str:
    """The state people mean: the job's (``terminated``, ``crashed``, …) when the session has a
    job, else the session's status."""
    return node.get("job_state") or node["status"] or "-"


def _label(ctx: Context, node: TreeNode) -> str:
    out = ctx.out
    state = node_state(node)
    ended = node["ended_ms"]
    age = fmt_age(node["created_ms"])
    when = f"ran {_span(node)}" if ended else f"up {age}"
    sid = out.paint(node["session_id"], "dim")
    text = f"{node['name']}@{node['version']} {out.state(state)} {out.paint(when, 'dim')} {sid}"
    why = ended_why(node)
    if why:
        text += out.paint(f" — {why}", "dim")
    if node["trust"] == "untrusted":
        text += " " + out.paint("untrusted", "yellow")
    return text


def ended_why(node: TreeNode) -> str | None:
    """Why an ended node ended, in the words of whatever ended it: its job's reason (an operator's
    cancel, its parent's, a deadline), else its session's recorded end (a lease lapse, an
    operator's ``sessions end``). A session that ended because its job was stopped is not shown as
    if it had failed on its own."""
    reason = node.get("reason")
    if not node["ended_ms"] and not reason:
        return None
    return reason or node["end_reason"] or None


def _span(node: TreeNode) -> str:
    start, end = node["created_ms"], node["ended_ms"]
    if not isinstance(start, int) or not isinstance(end, int):
        return "-"
    return fmt_age(start, end)


def _draw(ctx: Context, nodes: list[TreeNode], prefix: str) -> None:
    for i, node in enumerate(nodes):
        last = i == len(nodes) - 1
        ctx.out.line(f"{prefix}{'└── ' if last else '├── '}{_label(ctx, node)}")
        _draw(ctx, node["children"], prefix + ("    " if last else "│   "))


def run(ctx: Context, args: argparse.Namespace) -> int:
    body: TreeAnswer = ctx.client.call("GET", "/tree?state=" + ("all" if args.all else "running"))
    out = ctx.out
    if out.as_json:
        out.json(body)
        return 0
    roots = body["roots"]
    if not roots:
        if args.all:
            out.line("no sessions yet: start one with 'roostctl spawn NAME@VERSION --task TEXT'")
        else:
            every: TreeAnswer = ctx.client.call("GET", "/tree?state=all")
            ended = _count(every["roots"])
            more = f"; {ended} ended ('roostctl tree --all' shows them)" if ended else ""
            out.line(f"no running sessions{more}")
        return 0
    for root in roots:
        out.line(_label(ctx, root))
        _draw(ctx, root["children"], "")
    return 0

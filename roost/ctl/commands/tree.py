"""The delegation tree: sessions under their parents, with session status and job state.

Calls ``GET /tree?state=running|all`` (default: running sessions with their family);
``--json`` prints ``{"roots": [{session_id, name, version, status, trust, job_id, job_state?,
children: [...]}]}``.
"""

from __future__ import annotations

import argparse
from typing import Any

from roost.ctl.context import Context

NAME = "tree"
HELP = "delegation tree with states"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all", action="store_true", help="include sessions that ended")


def _label(ctx: Context, node: dict[str, Any]) -> str:
    out = ctx.out
    text = f"{node['name']}@{node['version']} {out.paint(node['session_id'], 'dim')} {out.state(node['status'])}"
    if node.get("job_state") and node.get("job_state") != node.get("status"):
        text += f" (job {out.state(node['job_state'])})"
    if node.get("trust") == "untrusted":
        text += " " + out.paint("untrusted", "yellow")
    return text


def _draw(ctx: Context, nodes: list[dict[str, Any]], prefix: str) -> None:
    for i, node in enumerate(nodes):
        last = i == len(nodes) - 1
        ctx.out.line(f"{prefix}{'└── ' if last else '├── '}{_label(ctx, node)}")
        _draw(ctx, node.get("children", []), prefix + ("    " if last else "│   "))


def run(ctx: Context, args: argparse.Namespace) -> int:
    body = ctx.client.call("GET", "/tree?state=" + ("all" if args.all else "running"))
    out = ctx.out
    if out.as_json:
        out.json(body)
        return 0
    roots = body.get("roots", [])
    if not roots:
        out.info("no running sessions" if not args.all else "no sessions")
        return 0
    for root in roots:
        out.line(_label(ctx, root))
        _draw(ctx, root.get("children", []), "")
    return 0

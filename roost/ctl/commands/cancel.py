"""Cancel a job: SIGTERM to its process group, SIGKILL after the grace; the parent gets one completion.

Calls ``POST /jobs/{id}/cancel``; ``--json`` prints the job after the cancel.
"""

from __future__ import annotations

import argparse

from roost.ctl.client import quote_id
from roost.ctl.commands.job import show
from roost.ctl.context import Context

NAME = "cancel"
HELP = "cancel a job"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id")


def run(ctx: Context, args: argparse.Namespace) -> int:
    body = ctx.client.call("POST", f"/jobs/{quote_id(args.job_id)}/cancel")
    if not ctx.out.as_json:
        ctx.out.info(f"cancelled {args.job_id}")
    show(ctx, body)
    return 0

"""Cancel a job: SIGTERM to its process group, SIGKILL after the grace; one completion is recorded.

Calls ``POST /jobs/{id}/cancel``; ``--json`` prints the job after the cancel. The completion's
detail says an operator cancelled it.
"""

from __future__ import annotations

import argparse

from roost.core.admin_models import JobView
from roost.ctl.client import quote_id
from roost.ctl.commands.job import show
from roost.ctl.context import Context

NAME = "cancel"
HELP = "cancel a job"
DESCRIPTION = (
    "Stop a running job: SIGTERM, then SIGKILL after the daemon's stop grace. Its completion\n"
    "records 'terminated' with the reason that an operator cancelled it."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", metavar="JOB_ID", help="the job to cancel (job_…)")


def run(ctx: Context, args: argparse.Namespace) -> int:
    body: JobView = ctx.client.call("POST", f"/jobs/{quote_id(args.job_id)}/cancel")
    if not ctx.out.as_json:
        ctx.out.info(f"cancelled {args.job_id} ({body['name']}@{body['version']}): {body['state']}")
    show(ctx, body)
    return 0

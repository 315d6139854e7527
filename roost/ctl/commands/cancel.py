"""Cancel a job: SIGTERM to its process group, SIGKILL after the grace; one completion is recorded.

Calls ``GET /jobs/{id}``, then ``POST /jobs/{id}/cancel``; ``--json`` prints the job after the
cancel. The completion's detail says an operator cancelled it. A job that had already ended is
not cancelled: roostctl says how it ended and exits 1 (the API itself stays idempotent: its
``POST`` answers the ended job as it is).
"""

from __future__ import annotations

import argparse

from roost.core.admin_models import JobView
from roost.core.wire import FINAL_JOB_STATES
from roost.ctl.client import quote_id
from roost.ctl.commands.job import show
from roost.ctl.context import Context
from roost.ctl.errors import CtlError
from roost.ctl.output import fmt_ms

NAME = "cancel"
HELP = "cancel a job"
DESCRIPTION = (
    "Stop a running job: SIGTERM, then SIGKILL after the daemon's stop grace. Its completion\n"
    "records 'terminated' with the reason that an operator cancelled it."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", metavar="JOB_ID", help="the job to cancel (job_…)")


def run(ctx: Context, args: argparse.Namespace) -> int:
    before: JobView = ctx.client.call("GET", f"/jobs/{quote_id(args.job_id)}")
    if before["state"] in FINAL_JOB_STATES:
        ended = f" at {fmt_ms(before['ended_ms'])}" if before["ended_ms"] is not None else ""
        raise CtlError(
            f"job {args.job_id} ({before['name']}@{before['version']}) had already ended ({before['state']}){ended}; "
            "there is nothing to cancel",
            code="already_ended",
        )
    body: JobView = ctx.client.call("POST", f"/jobs/{quote_id(args.job_id)}/cancel")
    if not ctx.out.as_json:
        ctx.out.info(f"cancelled {args.job_id} ({body['name']}@{body['version']}): {body['state']}")
    show(ctx, body)
    return 0

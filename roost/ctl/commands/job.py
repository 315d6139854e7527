"""Show one job.

Calls ``GET /jobs/{id}``; ``--json`` prints the job object.
"""

from __future__ import annotations

import argparse

from roost.ctl.client import quote_id
from roost.ctl.context import Context
from roost.ctl.output import fmt_ms

NAME = "job"
HELP = "show one job"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id")


def show(ctx: Context, body: dict[str, object]) -> None:
    out = ctx.out
    if out.as_json:
        out.json(body)
        return
    out.pairs(
        (k, out.state(v) if k == "state" else fmt_ms(v) if k.endswith("_ms") else v)
        for k, v in body.items()
        if not isinstance(v, (dict, list))
    )


def run(ctx: Context, args: argparse.Namespace) -> int:
    show(ctx, ctx.client.call("GET", f"/jobs/{quote_id(args.job_id)}"))
    return 0

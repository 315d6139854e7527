"""The start-up reconcile report: children re-adopted, finalized, and orphans ended.

Calls ``GET /reconcile`` and prints the launcher's report.
"""

from __future__ import annotations

import argparse

from roost.ctl.context import Context

NAME = "reconcile"
HELP = "show the start-up reconcile report"
DESCRIPTION = (
    "Show what the daemon found at start-up: children of the previous run it took back, ones that\n"
    "had ended (each recorded once), and leftovers it stopped."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """No options."""


def run(ctx: Context, args: argparse.Namespace) -> int:
    body = ctx.client.call("GET", "/reconcile")
    if ctx.out.as_json:
        ctx.out.json(body)
    else:
        ctx.out.pairs(sorted(body.items()))
    return 0

"""The daemon's effective configuration (after file, flags and reloads).

Calls ``GET /config``; no secret lives in it (keys are files in the state dir).
"""

from __future__ import annotations

import argparse

from roost.ctl.context import Context

NAME = "config"
HELP = "show the effective configuration"
DESCRIPTION = "Show the settings the daemon runs with: its defaults, the config file and flags, after reloads."


def add_arguments(p: argparse.ArgumentParser) -> None:
    """No options."""


def run(ctx: Context, args: argparse.Namespace) -> int:
    body = ctx.client.call("GET", "/config")
    if ctx.out.as_json:
        ctx.out.json(body)
    else:
        ctx.out.pairs((k, " ".join(map(str, v)) if isinstance(v, list) else v) for k, v in sorted(body.items()))
    return 0

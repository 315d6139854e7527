"""Reload like SIGHUP: re-read the config file and forget registry caches; jobs keep running.

Calls ``POST /reload`` → ``{reloaded, changed: [...], needs_restart: [...], error?}``. Settings
that need a restart (port, bind, state_dir, admin_socket, ephemeral_keys) are kept as they were.
"""

from __future__ import annotations

import argparse

from roost.core.admin_models import ReloadAnswer
from roost.ctl.context import Context
from roost.ctl.errors import CtlError

NAME = "reload"
HELP = "re-read the config file (like SIGHUP)"
DESCRIPTION = (
    "Re-read the daemon's config file and forget cached registry lookups; running jobs are not\n"
    "touched. Settings that need a restart (port, bind, state_dir, ...) keep their old values."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """No options."""


def run(ctx: Context, args: argparse.Namespace) -> int:
    body: ReloadAnswer = ctx.client.call("POST", "/reload")
    out = ctx.out
    if not body["reloaded"]:
        raise CtlError(f"reload failed, the old configuration stays: {body.get('error')}")
    if out.as_json:
        out.json(body)
    else:
        out.info("reloaded; changed: " + (", ".join(body["changed"]) or "nothing"))
        if body["needs_restart"]:
            out.info("these settings need a restart to apply: " + ", ".join(body["needs_restart"]))
    return 0

"""Show the daemon: version, listeners, key id, counts, draining.

Calls ``GET /status``. ``--json`` prints that object as is.
"""

from __future__ import annotations

import argparse

from roost.core.admin_models import StatusAnswer
from roost.ctl.context import Context

NAME = "status"
HELP = "daemon summary"
DESCRIPTION = "Show the daemon: version, address, state dir, key id, running sessions and jobs, draining or not."


def add_arguments(p: argparse.ArgumentParser) -> None:
    """No options."""


def run(ctx: Context, args: argparse.Namespace) -> int:
    body: StatusAnswer = ctx.client.call("GET", "/status")
    out = ctx.out
    if out.as_json:
        out.json(body)
        return 0
    sessions = body["sessions"]
    jobs = body["jobs"]
    job_text = ", ".join(f"{n} {s}" for s, n in sorted(jobs.items())) or "none"
    out.pairs(
        [
            ("daemon", f"mur-roost {body['version']} (pid {body['pid']})"),
            ("state", out.paint("draining", "yellow") if body["draining"] else out.paint("serving", "green")),
            ("uptime", f"{body['uptime_secs']:.0f}s"),
            ("tcp", body["url"]),
            ("admin socket", body["admin_socket"]),
            ("state dir", body["state_dir"] + (" (ephemeral keys)" if body["ephemeral_keys"] else "")),
            ("key id", body["key_id"]),
            (
                "sessions",
                f"{sessions['running']} running of {sessions['total']}, "
                f"{sessions['reserved_slots']} slots reserved (ceiling {body['max_live_capsules']})",
            ),
            ("jobs", job_text),
        ]
    )
    return 0

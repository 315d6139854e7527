"""Show the daemon: version, listeners, key id, counts, draining.

Calls ``GET /status``. ``--json`` prints that object as is.
"""

from __future__ import annotations

import argparse
from typing import Any

from roost.ctl.context import Context

NAME = "status"
HELP = "daemon summary"
DESCRIPTION = "Show the daemon: version, address, state dir, key id, running sessions and jobs, draining or not."


def add_arguments(p: argparse.ArgumentParser) -> None:
    """No options."""


def run(ctx: Context, args: argparse.Namespace) -> int:
    body: dict[str, Any] = ctx.client.call("GET", "/status")
    out = ctx.out
    if out.as_json:
        out.json(body)
        return 0
    sessions = body.get("sessions", {})
    jobs = body.get("jobs", {})
    job_text = ", ".join(f"{n} {s}" for s, n in sorted(jobs.items())) or "none"
    out.pairs(
        [
            ("daemon", f"mur-roost {body.get('version')} (pid {body.get('pid')})"),
            ("state", out.paint("draining", "yellow") if body.get("draining") else out.paint("serving", "green")),
            ("uptime", f"{body.get('uptime_secs', 0):.0f}s"),
            ("tcp", body.get("url")),
            ("admin socket", body.get("admin_socket")),
            ("state dir", str(body.get("state_dir")) + (" (ephemeral keys)" if body.get("ephemeral_keys") else "")),
            ("key id", body.get("key_id")),
            (
                "sessions",
                f"{sessions.get('running', 0)} running of {sessions.get('total', 0)}, "
                f"{sessions.get('reserved_slots', 0)} slots reserved (ceiling {body.get('max_live_capsules')})",
            ),
            ("jobs", job_text),
        ]
    )
    return 0

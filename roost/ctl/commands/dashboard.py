"""Serve a live dashboard of the delegation tree on a loopback port, for this user only.

Prints the URL (with a one-run token, as Jupyter does) on its first line, opens it in a browser
unless ``--no-browser``, and serves until Ctrl-C. It talks to the daemon only over the admin
socket; see docs/operations.md ("Dashboard") for its checks.
"""

from __future__ import annotations

import argparse

from roost.ctl.context import Context
from roost.ctl.errors import CtlError

NAME = "dashboard"
HELP = "serve a live dashboard in your browser"
DESCRIPTION = (
    "Serve a live view of the delegation tree, jobs, their logs and traces, and host gauges on\n"
    "127.0.0.1, for your user only. The first line printed is the URL to open (it holds a token);\n"
    "a browser is opened unless --no-browser. Ctrl-C stops it."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=0, metavar="N", help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--no-browser", action="store_true", help="only print the URL; do not open a browser")


def run(ctx: Context, args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise CtlError(f"--port must be between 0 and 65535, not {args.port}")
    from roost.dashboard.run import DashboardError, serve

    path, _ = ctx.socket_path
    try:
        return serve(ctx.out, path, port=args.port, open_browser=not args.no_browser)
    except DashboardError as exc:
        raise CtlError(str(exc)) from None

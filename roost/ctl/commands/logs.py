"""A job's or session's log files: the last lines, or follow them with ``-f`` until it ends.

``GET /logs/{id}?tail=N`` → ``{"files": [...], "lines": [{"file", "line"}]}``; with ``-f``,
``GET /logs/{id}?follow=1&tail=N`` streams NDJSON ``{"file", "line"}`` objects.
"""

from __future__ import annotations

import argparse

from roost.ctl.client import path_with_query, quote_id
from roost.ctl.context import Context

NAME = "logs"
HELP = "show or follow a job's or session's logs"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="job id (job_…) or session id (ses_…)")
    p.add_argument("-f", "--follow", action="store_true")
    p.add_argument("-n", "--tail", type=int, default=100, metavar="N")


def run(ctx: Context, args: argparse.Namespace) -> int:
    out = ctx.out
    base = f"/logs/{quote_id(args.id)}"
    if not args.follow:
        body = ctx.client.call("GET", path_with_query(base, tail=args.tail))
        if out.as_json:
            out.json(body)
            return 0
        if not body.get("files"):
            out.info(f"no log files for {args.id}")
        many = len(body.get("files", [])) > 1
        for item in body.get("lines", []):
            out.line((f"{out.paint(item['file'], 'dim')} " if many else "") + item["line"])
        return 0
    for item in ctx.client.stream(path_with_query(base, follow=True, tail=args.tail)):
        if out.as_json:
            out.json_line(item)
        else:
            out.line(item.get("line", ""))
    return 0

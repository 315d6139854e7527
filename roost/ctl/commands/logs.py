"""A job's or session's output: stderr and stdout (labelled), then its result once written.

``GET /logs/{id}?tail=N`` → ``{"files": [...], "lines": [{"file", "stream", "line"}]}``; with
``-f``, ``GET /logs/{id}?follow=1&tail=N`` streams NDJSON ``{"file", "stream", "line"}``
objects until the job ends.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from roost.core.admin_models import LogLine, LogsAnswer
from roost.ctl.client import path_with_query, quote_id
from roost.ctl.context import Context

NAME = "logs"
HELP = "show or follow a job's or session's output"
DESCRIPTION = (
    "Show what a job or session wrote: each line labelled stderr, stdout, or result (the task's\n"
    "out/result.txt, written when the task ends). -f follows new lines until the job ends."
)
_COLOR = {"stderr": "yellow", "stdout": "cyan", "result": "green"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", metavar="ID", help="job id (job_…) or session id (ses_…)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until the job ends")
    p.add_argument("-n", "--tail", type=int, default=100, metavar="N", help="how many recent lines first (default 100)")


def _render(ctx: Context, item: LogLine) -> str:
    stream = item["stream"] or item["file"] or "log"
    return f"{ctx.out.paint(stream.ljust(6), _COLOR.get(stream, 'dim'))} | {item['line']}"


def _nothing_yet(ctx: Context, ident: str) -> str:
    return f"nothing written yet by {ident}; 'roostctl logs -f {ident}' waits for its output"


def run(ctx: Context, args: argparse.Namespace) -> int:
    out = ctx.out
    base = f"/logs/{quote_id(args.id)}"
    if not args.follow:
        body: LogsAnswer = ctx.client.call("GET", path_with_query(base, tail=args.tail))
        if out.as_json:
            out.json(body)
            return 0
        lines = body["lines"]
        if not lines:
            out.info(_nothing_yet(ctx, args.id))
        for item in lines:
            out.line(_render(ctx, item))
        return 0
    seen = False
    items: Iterator[LogLine] = ctx.client.stream(path_with_query(base, follow=True, tail=args.tail))
    for item in items:
        if out.as_json:
            out.json_line(item)
        else:
            out.line(_render(ctx, item))
        seen = True
    if not seen and not out.as_json:
        out.info(f"{args.id} ended without writing anything")
    return 0

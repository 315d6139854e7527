"""Observation events (:mod:`roost.observe.events`): the recent ones, or follow them live with ``-f``.

``GET /events?replay=N`` → ``{"events": [...]}``; with ``-f``, ``GET /events?follow=1&replay=N``
streams NDJSON. ``--json`` prints the object (or, with ``-f``, one event per line).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from roost.core.admin_models import EventList, ObserveEvent
from roost.ctl.client import path_with_query
from roost.ctl.context import Context
from roost.ctl.output import fmt_ms

NAME = "events"
HELP = "show or follow the daemon's events"
DESCRIPTION = (
    "Show what the daemon did recently (processes started and ended, completions delivered,\n"
    "peer files redeemed, messages relayed), or follow it live with -f."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new events as they happen (Ctrl-C stops)")
    p.add_argument(
        "-n",
        "--replay",
        type=int,
        default=None,
        metavar="N",
        help="how many recent events to show first (default 20; 0 with -f)",
    )


def _render(ctx: Context, ev: ObserveEvent) -> str:
    out = ctx.out
    if ev["type"] == "events.lagged":
        return out.paint(f"… {ev.get('dropped')} events dropped (reader too slow)", "yellow")
    kind = ev["type"].removeprefix("operation.")
    color = {"failed": "red", "completed": "green"}.get(kind)
    attrs = " ".join(f"{k.split('.')[-1]}={v}" for k, v in (ev.get("attributes") or {}).items())
    extra = f" {ev['durationMs']}ms" if "durationMs" in ev else ""
    err = ev.get("error")
    if err is not None:
        extra += f" error={err.get('name')}"
    return f"{fmt_ms(ev.get('timestamp'))} {ev.get('operation', '-')} {out.paint(kind, color)}{extra} {attrs}".rstrip()


def run(ctx: Context, args: argparse.Namespace) -> int:
    replay = args.replay if args.replay is not None else (0 if args.follow else 20)
    out = ctx.out
    if not args.follow:
        body: EventList = ctx.client.call("GET", path_with_query("/events", replay=replay))
        if out.as_json:
            out.json(body)
        else:
            for ev in body["events"]:
                out.line(_render(ctx, ev))
            if not body["events"]:
                out.info("no events yet")
        return 0
    events: Iterator[ObserveEvent] = ctx.client.stream(path_with_query("/events", follow=True, replay=replay))
    for ev in events:
        if out.as_json:
            out.json_line(ev)
        else:
            out.line(_render(ctx, ev))
    return 0

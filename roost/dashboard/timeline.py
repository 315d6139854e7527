"""A session's trace (``trace.jsonl``) laid out on one time axis, for the job page (pure).

Lines fall into lanes: ``task`` (task_start → task_end bars), ``delegation`` (delegation_start →
delegation bars, with the child capsule and outcome), ``a2a_send`` (and the other a2a lines) and
``peer`` (handle mint, redeem, fetch) as points, ``session`` for session_start/end. Each item's
``left`` and ``width`` are percentages of the span from the first line to the last.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["LANES", "Item", "lane_of", "layout", "parse_trace"]

LANES = ("session", "task", "delegation", "a2a_send", "peer")


@dataclass(frozen=True)
class Item:
    lane: str
    label: str
    start_ms: int
    end_ms: int | None  # None: a point
    left: float
    width: float
    outcome: str | None
    kind: str
    open: bool = False
    """A bar still running (its end is the last line so far; the page grows it to now)."""


def parse_trace(text: str) -> list[dict[str, Any]]:
    """Trace lines that are JSON objects with an event type and a timestamp; others are skipped."""
    out = []
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if (
            isinstance(line, dict)
            and isinstance(line.get("timestamp"), int)
            and isinstance(line.get("event_type"), str)
        ):
            out.append(line)
    return out


def lane_of(event_type: str) -> str | None:
    if event_type.startswith("session_"):
        return "session"
    if event_type.startswith("task_"):
        return "task"
    if event_type.startswith("delegation"):
        return "delegation"
    if event_type.startswith("a2a_"):
        return "a2a_send"
    if event_type.startswith("peer_"):
        return "peer"
    return None


def _pct(ms: int, t0: int, span: int) -> float:
    return round(100.0 * (ms - t0) / span, 3) if span else 0.0


def layout(lines: list[dict[str, Any]]) -> tuple[list[Item], int, int]:
    """Items on the axis, and the axis' first and last timestamp."""
    if not lines:
        return [], 0, 0
    t0 = min(int(x["timestamp"]) for x in lines)
    t1 = max(int(x["timestamp"]) for x in lines)
    span = t1 - t0
    open_tasks: dict[str, dict[str, Any]] = {}
    open_dlg: dict[str, dict[str, Any]] = {}
    items: list[Item] = []

    def bar(lane: str, label: str, start: dict[str, Any], end: dict[str, Any] | None, outcome: str | None) -> None:
        s = int(start["timestamp"])
        e = int(end["timestamp"]) if end is not None else t1
        items.append(
            Item(
                lane,
                label,
                s,
                e,
                _pct(s, t0, span),
                max(0.4, _pct(e, t0, span) - _pct(s, t0, span)),
                outcome,
                "bar",
                open=end is None,
            )
        )

    for line in sorted(lines, key=lambda x: int(x["timestamp"])):
        et = str(line["event_type"])
        lane = lane_of(et)
        if lane is None:
            continue
        if et == "task_start":
            open_tasks[str(line.get("task_id"))] = line
        elif et == "task_end" and str(line.get("task_id")) in open_tasks:
            start = open_tasks.pop(str(line.get("task_id")))
            took = int(line["timestamp"]) - int(start["timestamp"])
            status = str(line.get("exit_status") or "ended")
            bar("task", f"task {status}, {took} ms", start, line, str(line.get("exit_status") or "") or None)
        elif et == "delegation_start":
            open_dlg[str(line.get("delegation_id"))] = line
        elif et == "delegation" and str(line.get("delegation_id")) in open_dlg:
            start = open_dlg.pop(str(line.get("delegation_id")))
            who = f"{line.get('capsule')}@{line.get('version')}"
            took = int(line["timestamp"]) - int(start["timestamp"])
            outcome = str(line.get("outcome") or "") or None
            bar("delegation", f"delegation to {who}: {outcome or 'ended'}, {took} ms", start, line, outcome)
        else:
            ts = int(line["timestamp"])
            detail = line.get("peer_url") or line.get("path") or line.get("capsule_name") or line.get("capsule") or ""
            label = f"{et} {detail}".strip()
            items.append(Item(lane, label, ts, None, _pct(ts, t0, span), 0.0, line.get("outcome"), "point"))
    for start in open_tasks.values():
        bar("task", "task (running)", start, None, None)
    for start in open_dlg.values():
        bar("delegation", f"delegation to {start.get('capsule')}@{start.get('version')} (running)", start, None, None)
    return items, t0, t1

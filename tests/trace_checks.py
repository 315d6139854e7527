"""Reusable checks of the trace format's guarantees, for any session's trace.

Import ``assert_trace_guarantees(path)`` from any test: it reads the file and asserts every
guarantee a complete session's ``trace.jsonl`` must meet, returning the parsed lines.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["ENVELOPE", "assert_trace_guarantees", "load_trace"]

ENVELOPE = ["event_type", "event_id", "parent_id", "session_id", "timestamp"]
EVENT_ID_RE = re.compile(r"^evt_[0-9a-f]{32}$")
COUNTS = {
    "total_turns": "turns",
    "total_input_tokens": "input_tokens",
    "total_output_tokens": "output_tokens",
    "total_tool_calls": "tool_calls",
    "total_shell_calls": "shell_calls",
}
SESSION_CHILDREN = {"session_end", "a2a_task_received", "a2a_send", "task_start", "spawner_ended"}


def load_trace(path: Path | str) -> list[dict[str, Any]]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    assert all(line.strip() for line in lines), f"{path}: blank line in trace"
    return [json.loads(line) for line in lines]


def assert_trace_guarantees(path: Path | str, *, complete: bool = True) -> list[dict[str, Any]]:
    """Assert the seed's guarantees; ``complete=False`` skips the session_end checks (a live session)."""
    recs = load_trace(path)
    assert recs, f"{path}: empty trace"
    for r in recs:
        assert list(r)[:5] == ENVELOPE, f"envelope order wrong: {list(r)[:5]}"
        assert EVENT_ID_RE.match(r["event_id"]), r["event_id"]
        assert isinstance(r["timestamp"], int) and r["timestamp"] > 0
    # One session_start (first line, the only null parent) and at most/exactly one session_end.
    starts = [r for r in recs if r["event_type"] == "session_start"]
    ends = [r for r in recs if r["event_type"] == "session_end"]
    assert len(starts) == 1, f"{len(starts)} session_start lines"
    assert recs[0]["event_type"] == "session_start"
    assert recs[0]["parent_id"] is None
    if complete:
        assert len(ends) == 1, f"{len(ends)} session_end lines"
    else:
        assert len(ends) <= 1
    # Same session id everywhere; distinct event ids; parents resolve to earlier lines.
    sid = recs[0]["session_id"]
    assert {r["session_id"] for r in recs} == {sid}
    ids = [r["event_id"] for r in recs]
    assert len(set(ids)) == len(ids), "duplicate event_id"
    seen: dict[str, dict[str, Any]] = {}
    node = recs[0]["event_id"]
    for r in recs:
        pid = r["parent_id"]
        if r is not recs[0]:
            assert pid is not None, f"{r['event_type']} has a null parent_id"
            assert pid in seen, f"{r['event_type']} parent {pid} does not resolve to an earlier line"
            if r["event_type"] in SESSION_CHILDREN:
                assert pid == node, f"{r['event_type']} must hang off the session node"
        seen[r["event_id"]] = r
    # Task pairs: one task_start/task_end per task, end parented on its start.
    task_starts = {r["task_id"]: r for r in recs if r["event_type"] == "task_start"}
    task_ends = [r for r in recs if r["event_type"] == "task_end"]
    assert len(task_starts) == len([r for r in recs if r["event_type"] == "task_start"]), "task_start repeated"
    ended = [r["task_id"] for r in task_ends]
    assert len(set(ended)) == len(ended), "task_end repeated"
    for e in task_ends:
        assert e["task_id"] in task_starts, f"task_end for unknown task {e['task_id']}"
        assert e["parent_id"] == task_starts[e["task_id"]]["event_id"]
    for t in task_starts.values():
        assert t["origin"] in ("user", "peer", "schedule", "event", "completion", "system")
        assert t["trust"] in ("trusted", "untrusted")
        assert t["lane"] in ("user", "peer", "bg")
        assert ("delegation_id" in t) == (t["origin"] == "completion" and "delegation_id" in t)
    # a2a_task_received immediately precedes its task_start.
    for i, r in enumerate(recs):
        if r["event_type"] == "a2a_task_received":
            nxt = recs[i + 1]
            assert nxt["event_type"] == "task_start" and nxt["task_id"] == r["task_id"]
            assert nxt["source"] == "a2a"
    # spawned_by and delegation_id come together or not at all.
    assert ("spawned_by" in recs[0]) == ("delegation_id" in recs[0])
    if complete:
        assert set(ended) == set(task_starts), "a task_start without its task_end"
        end = ends[0]
        session_end_index = recs.index(end)
        for r in recs[session_end_index + 1 :]:
            assert r["event_type"] in ("a2a_send", "resource_read", "resource_list", "peer_handle_redeem"), (
                f"{r['event_type']} after session_end"
            )
        for total, field in COUNTS.items():
            assert end[total] == sum(e[field] for e in task_ends), f"{total} != sum of task_end.{field}"
        assert end["exit_status"] in ("ok", "failed", "max_turns_reached", "spend_ceiling_reached", "canceled")
        if task_ends:
            assert end["exit_status"] == task_ends[-1]["exit_status"]
        assert end["parent_id"] == node
    return recs

"""Pure views of the daemon's state for the admin API: session rows and the delegation tree.

Kept free of I/O so the shapes ``roostctl`` prints are unit-testable and so a view can never
leak a secret: only ids, names, states and counts are copied out of a record (no credential
nonce, no handle salt, no manifest body).
"""

from __future__ import annotations

from collections.abc import Iterable

from roost.core.admin_models import SessionView, TreeNode
from roost.state.sessions import SessionRecord

__all__ = ["session_view", "tree"]


def session_view(rec: SessionRecord, live_children: int = 0, stopped: str | None = None) -> SessionView:
    """One session's row; ``end_reason`` says truthfully why it ended: its own record's reason (a
    lease lapse, an operator's ``sessions end``), else ``stopped`` — how its job was stopped (an
    operator's cancel, its parent's, a deadline) — else None (it ended itself)."""
    return {
        "session_id": rec.session_id,
        "name": rec.name,
        "version": rec.version,
        "sha256": rec.sha256,
        "status": rec.status,
        "parent_id": rec.parent_id,
        "depth_remaining": rec.depth_remaining,
        "trust": rec.trust,
        "uid": rec.uid,
        "workdir": rec.workdir,
        "pid": rec.pid,
        "capsule_url": rec.capsule_url,
        "job_id": rec.job_id,
        "created_ms": rec.created_ms,
        "ended_ms": rec.ended_ms,
        "end_reason": rec.end_reason or (stopped if rec.ended_ms is not None else None),
        "live_children": live_children,
    }


def tree(
    records: Iterable[SessionRecord],
    *,
    job_states: dict[str, str] | None = None,
    job_ends: dict[str, tuple[str | None, str | None]] | None = None,
) -> list[TreeNode]:
    """Sessions nested under their parents, oldest first; a session whose parent is unknown is a root.

    ``job_states`` maps a job id to its launcher state, shown beside the session status (a session
    can be ``complete`` while its job is still delivering, or ``running`` while the job is cancelled;
    a cancelled job is ``terminated`` while its session says ``failed``). ``job_ends`` maps a job id
    to how it ended (``(outcome, reason)``), copied onto its node. Each node has its ``depth``
    (0 for a root).
    """
    recs = sorted(records, key=lambda r: (r.created_ms, r.session_id))
    by_id = {r.session_id: r for r in recs}
    nodes: dict[str, TreeNode] = {}
    for r in recs:
        node: TreeNode = {
            "session_id": r.session_id,
            "name": r.name,
            "version": r.version,
            "status": r.status,
            "trust": r.trust,
            "job_id": r.job_id,
            "created_ms": r.created_ms,
            "ended_ms": r.ended_ms,
            "end_reason": r.end_reason,
            "depth": 0,
            "children": [],
        }
        if job_states is not None and r.job_id is not None and r.job_id in job_states:
            node["job_state"] = job_states[r.job_id]
        if job_ends is not None and r.job_id is not None and r.job_id in job_ends:
            node["outcome"], node["reason"] = job_ends[r.job_id]
        nodes[r.session_id] = node
    roots: list[TreeNode] = []
    for r in recs:
        parent = r.parent_id
        if parent is not None and parent in by_id and parent != r.session_id:
            nodes[parent]["children"].append(nodes[r.session_id])
        else:
            roots.append(nodes[r.session_id])
    stack = [(n, 0) for n in roots]
    while stack:
        node, depth = stack.pop()
        node["depth"] = depth
        stack.extend((c, depth + 1) for c in node["children"])
    return roots

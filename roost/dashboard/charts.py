"""Small charts of the host gauges' last hour and the delegation tree's timeline (pure HTML/SVG).

The charts are inline SVG drawn on the server from ``GET /history`` (the daemon's bounded ring,
roost/observe/history.py): no script or style attribute is needed, so the page's content
security policy stays strict. Totals (spawn decisions, refusals) are drawn as rates per minute.
Each chart also says its latest value and its peak in words, and carries a ``<title>``, so it
reads without the picture.

The tree timeline has one row per job of a delegation tree, each bar from the job's start to its
end. A running job's bar has no end: the page's script grows it to now every second (the bars'
places are data attributes the script applies, as for the trace timeline).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from html import escape

from roost.core.admin_models import HistoryAnswer, TreeNode

__all__ = ["CHARTS", "Series", "charts", "series", "tree_rows", "tree_timeline"]

W, H = 240, 48
CHARTS = (
    ("live", "live capsules", ""),
    ("starting", "jobs starting", ""),
    ("lag_ms", "loop lag, worst per sample", " ms"),
    ("spawns", "spawn decisions", " /min"),
    ("refusals", "refusals", " /min"),
)
_RATES = frozenset({"spawns", "refusals"})

Series = list[tuple[float, float]]


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def series(history: HistoryAnswer, name: str) -> Series:
    """``(t_ms, value)`` points of one field; totals become per-minute rates between samples."""
    fields = history["fields"]
    if name not in fields:
        return []
    i, t = fields.index(name), fields.index("t_ms")
    rows = history["samples"]
    if name not in _RATES:
        return [(float(r[t]), float(r[i])) for r in rows]
    out: Series = []
    for prev, cur in itertools.pairwise(rows):
        dt = (cur[t] - prev[t]) / 60_000
        if dt > 0:
            out.append((float(cur[t]), max(0.0, (cur[i] - prev[i]) / dt)))
    return out


def _fmt(v: float) -> str:
    return f"{v:.0f}" if v >= 10 or v == int(v) else f"{v:.2f}"


def _svg(points: Series, label: str) -> str:
    if len(points) < 2:
        empty = f"{label}: not enough samples yet"
        return f'<svg class="spark" viewBox="0 0 {W} {H}" role="img" aria-label="{_e(empty)}"></svg>'
    t0, t1 = points[0][0], points[-1][0]
    top = max(v for _, v in points) or 1.0
    span = (t1 - t0) or 1.0
    xy = " ".join(f"{(t - t0) / span * W:.1f},{H - 2 - v / top * (H - 4):.1f}" for t, v in points)
    area = f"0,{H} {xy} {W},{H}"
    return (
        f'<svg class="spark" viewBox="0 0 {W} {H}" preserveAspectRatio="none" role="img" aria-label="{_e(label)}">'
        f"<title>{_e(label)}</title>"
        f'<polygon class="area" points="{area}"/><polyline class="line" points="{xy}"/></svg>'
    )


def charts(history: HistoryAnswer | None) -> str:
    """The five gauge charts of the home page (one figure each)."""
    if history is None:
        return '<p class="empty">No history: this daemon does not keep one.</p>'
    minutes = len(history["samples"]) * history["interval_secs"] / 60
    out = []
    for name, title, unit in CHARTS:
        points = series(history, name)
        if points:
            last, peak = points[-1][1], max(v for _, v in points)
            words = f"now {_fmt(last)}{unit}, peak {_fmt(peak)}{unit}"
        else:
            words = "no samples yet"
        label = f"{title} over the last {minutes:.0f} min: {words}"
        out.append(
            f'<figure class="chart" data-chart="{_e(name)}" data-points="{len(points)}">'
            f'<figcaption><span class="k">{_e(title)}</span> <span class="v">{_e(words)}</span></figcaption>'
            f"{_svg(points, label)}</figure>"
        )
    span = f"last {minutes:.0f} min, one sample every {history['interval_secs']:g} s"
    return f'<section class="charts" aria-label="Host history ({_e(span)})">{"".join(out)}</section>'


def tree_rows(node: TreeNode, depth: int = 0) -> list[tuple[int, TreeNode]]:
    """The node and its descendants, depth first, each with its depth below ``node``."""
    out = [(depth, node)]
    for child in node["children"]:
        out += tree_rows(child, depth + 1)
    return out


def _state(node: TreeNode) -> str:
    return node.get("job_state") or node["status"]


def tree_timeline(root: TreeNode, now_ms: int, *, current: str | None = None) -> str:
    """One row per job of the tree under ``root``; bars of running jobs grow to now (script)."""
    rows = tree_rows(root)
    ends = [n["ended_ms"] for _, n in rows if n["ended_ms"] is not None]
    running = any(n["ended_ms"] is None for _, n in rows)
    t0 = root["created_ms"]
    t1 = now_ms if running or not ends else max(ends)
    items: list[str] = []
    for depth, n in rows:
        end = n["ended_ms"]
        href = f"/job/{_e(n['job_id'])}" if n["job_id"] else f"/session/{_e(n['session_id'])}"
        mark = ' aria-current="page"' if current is not None and n["session_id"] == current else ""
        state = _state(n)
        end_attr = f' data-end="{end}"' if end is not None else ""
        items.append(
            f'<li class="row" data-state="{_e(state)}" data-depth="{depth}">'
            f'<span class="row-label"><span class="indent" data-depth="{depth}"></span>'
            f'<a href="{href}"{mark}>{_e(n["name"])}@{_e(n["version"])}</a> <span class="off">{_e(state)}</span></span>'
            f'<span class="track"><span class="mark bar tl-bar" data-start="{n["created_ms"]}"{end_attr}'
            f' data-outcome="{_e(n.get("outcome") or "")}" title="{_e(n["name"])}: {_e(state)}"></span></span></li>'
        )
    live = " data-live" if running else ""
    return (
        '<figure class="timeline tree-timeline" aria-label="Delegation tree timeline"'
        f' data-t0="{t0}" data-t1="{t1}"{live}>'
        f'<div class="axis"><span class="row-label">job</span><span class="track">'
        f'<span><time class="when" data-ms="{t0}">{t0}</time></span><span class="tl-span"></span></span></div>'
        f'<ol class="rows">{"".join(items)}</ol></figure>'
    )


def find(roots: Sequence[TreeNode], session_id: str) -> tuple[TreeNode, TreeNode] | None:
    """The tree's root and the node of ``session_id`` in it."""
    for root in roots:
        for _, node in tree_rows(root):
            if node["session_id"] == session_id:
                return root, node
    return None

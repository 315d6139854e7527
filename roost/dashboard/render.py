"""The dashboard's HTML, rendered on the server from the admin API's answers (pure functions).

Everything that comes from the daemon or a capsule is escaped. States are shown as a word with
a symbol (never by colour alone); times are ``<time>`` elements carrying milliseconds, which the
page's script writes in the browser's own time zone (UTC ISO text is the fallback).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from html import escape

from roost.core.admin_models import JobView, SessionDetail, TreeNode
from roost.core.wire import FINAL_JOB_STATES
from roost.dashboard.gauges import Gauges
from roost.dashboard.timeline import LANES, Item

__all__ = ["SYMBOLS", "detail_fragment", "home_fragment", "page", "state_badge"]

SYMBOLS = {
    "running": "●",
    "starting": "◌",
    "complete": "✓",
    "failed": "✗",
    "crashed": "‼",
    "terminated": "■",
}


def _e(value: object) -> str:
    return escape("-" if value is None else str(value), quote=True)


def iso(ms: object) -> str:
    if not isinstance(ms, int):
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def when(ms: object) -> str:
    """A wall-clock time the script rewrites in the browser's zone."""
    if not isinstance(ms, int):
        return "-"
    return f'<time class="when" datetime="{iso(ms)}" data-ms="{ms}">{iso(ms)}</time>'


def age(ms: object, end_ms: object = None) -> str:
    """ "up 3m10s" for something running, "ran 2s" once it ended (the script keeps it current)."""
    if not isinstance(ms, int):
        return ""
    end = f' data-end="{end_ms}"' if isinstance(end_ms, int) else ""
    return f'<time class="age" data-ms="{ms}"{end} datetime="{iso(ms)}">{iso(ms)}</time>'


def state_badge(state: object) -> str:
    s = str(state or "unknown")
    return (
        f'<span class="badge" data-state="{_e(s)}"><span aria-hidden="true">{SYMBOLS.get(s, "?")}</span> {_e(s)}</span>'
    )


def page(title: str, body: str, *, csrf: str, script_data: str = "", live: bool = True) -> str:
    """A whole page; ``live`` loads the script that follows the daemon (off for the token page)."""
    script = '<script src="/static/app.js" defer></script>' if live else ""
    conn = '<span id="conn" class="conn" role="status" aria-live="polite">connecting…</span>' if live else ""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf" content="{_e(csrf)}">
<title>{_e(title)} · mur-roost</title>
<link rel="stylesheet" href="/static/style.css">
<link rel="icon" href="/favicon.ico" type="image/svg+xml">
{script}
</head>
<body{script_data}>
<a class="skip" href="#main">Skip to content</a>
<header><a class="home" href="/">mur-roost</a>
<nav class="nav" aria-label="Pages"><a href="/">tree</a> <a href="/jobs">jobs</a> <a href="/eventlog">events</a></nav>
<span class="sub">{_e(title)}</span>
<span id="daemon" class="daemon" role="status" aria-live="polite"></span>
{conn}</header>
<main id="main" tabindex="-1">
<div id="notice" role="status" aria-live="polite"></div>
{body}
</main>
</body>
</html>
"""


def _node_state(node: TreeNode) -> str:
    return node.get("job_state") or node["status"] or "unknown"


def _node(node: TreeNode) -> str:
    state = _node_state(node)
    capsule = f"{node['name']}@{node['version']}"
    href = f"/job/{_e(node['job_id'])}" if node["job_id"] else f"/session/{_e(node['session_id'])}"
    ended = node["ended_ms"]
    outcome = ""
    if state in FINAL_JOB_STATES or ended:
        said = node.get("reason") or node["end_reason"]  # the job's words, else the session's end
        why = f": {_e(said)}" if said else ""
        outcome = f' <span class="outcome">— {_e(node.get("outcome") or state)}{why}</span>'
        if ended:
            outcome += f' <span class="meta">ended {when(ended)}</span>'
    kids = node["children"]
    sub = f"<ul>{''.join(_node(k) for k in kids)}</ul>" if kids else ""
    return (
        f'<li data-session="{_e(node["session_id"])}"'
        f' data-state="{_e(state)}">'
        f'<a class="node" id="n-{_e(node["session_id"])}" href="{href}">'
        f"{state_badge(state)} <strong>{_e(capsule)}</strong>"
        f' <span class="meta">depth {_e(node["depth"])} · {age(node["created_ms"], ended)}</span>'
        f"{outcome}</a>{sub}</li>"
    )


def tree(roots: Sequence[TreeNode], empty: str) -> str:
    if not roots:
        return f'<p class="empty">{_e(empty)}</p>'
    return f'<ul class="tree">{"".join(_node(r) for r in roots)}</ul>'


def _gauges(g: Gauges) -> str:
    refusals = ", ".join(f"{_e(k)} {v}" for k, v in sorted(g.refusals.items())) or "none"
    lag = "-" if g.loop_lag_ms is None else f"mean {g.loop_lag_ms:.2f} ms"
    if g.loop_lag_p99_ms is not None:
        lag += f", 99% under {g.loop_lag_p99_ms:g} ms"
    pct = round(100 * g.live_ratio)
    drain = '<span class="badge" data-state="terminated">draining</span>' if g.draining else "serving"
    return f"""<section class="gauges" aria-label="Host">
<div class="gauge"><span class="k">live capsules</span>
<meter min="0" max="{g.ceiling or 1}" value="{g.live}" aria-label="live capsules">{g.live}</meter>
<span class="v">{g.live} of {g.ceiling} ({pct}%)</span></div>
<div class="gauge"><span class="k">starting</span><span class="v">{g.starting}</span></div>
<div class="gauge"><span class="k">running jobs</span><span class="v">{g.running_jobs}</span></div>
<div class="gauge"><span class="k">refusals</span><span class="v">{refusals}</span></div>
<div class="gauge"><span class="k">loop lag</span><span class="v">{lag}</span></div>
<div class="gauge"><span class="k">daemon</span><span class="v">{drain}</span></div>
</section>"""


def home_fragment(running: Sequence[TreeNode], ended: Sequence[TreeNode], g: Gauges, charts: str = "") -> str:
    drain = ""
    if not g.draining:
        drain = '<button type="button" class="danger" data-action="drain" data-label="the daemon">Drain…</button>'
    return f"""{_gauges(g)}
{charts}
<section aria-labelledby="h-running"><h2 id="h-running">Running</h2>
{tree(running, "No session is running. Start one: roostctl spawn orchestrator@0.1.0 --task TEXT")}</section>
<section aria-labelledby="h-ended"><h2 id="h-ended">Recently ended</h2>
{tree(ended, "Nothing has ended yet.")}
<p><a href="/jobs?state=">Every job, with filters and end times →</a></p></section>
<section class="actions" aria-label="Daemon actions">{drain}</section>"""


def _plain(value: object) -> object:
    return ("yes" if value else "no") if isinstance(value, bool) else value


def _pairs(rows: Iterable[tuple[str, str]]) -> str:
    return '<dl class="pairs">' + "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _timeline(items: Sequence[Item], t0: int, t1: int, *, live: bool = False) -> str:
    """One row per trace item (grouped by lane, in time order), each mark on the shared axis.

    Marks carry their position as data attributes that the script applies (the page's content
    security policy allows no inline styles); without the script the rows still read in order.
    ``live`` (the job still runs): the axis runs to now and open bars grow with it.
    """
    if not items:
        return '<p class="empty">No trace lines yet.</p>'
    rows = []
    for lane in LANES:
        for i in sorted((i for i in items if i.lane == lane), key=lambda i: i.start_ms):
            offset = (i.start_ms - t0) / 1000
            tag = f'<span class="lane-tag">{_e(lane)}</span>'
            cls = f"{i.kind} tl-bar" if i.kind == "bar" else i.kind
            end = "" if i.open or i.end_ms is None else f' data-end="{i.end_ms}"'
            rows.append(
                f'<li class="row" data-lane="{_e(lane)}"><span class="row-label">{tag}'
                f' {_e(i.label)} <span class="off">+{offset:.3f} s</span></span>'
                f'<span class="track"><span class="mark {cls}" data-left="{i.left}" data-width="{i.width}"'
                f' data-start="{i.start_ms}"{end}'
                f' data-outcome="{_e(i.outcome)}" title="{_e(i.label)}"></span></span></li>'
            )
    span = (t1 - t0) / 1000
    grows = f' data-t0="{t0}" data-t1="{t1}" data-live' if live and any(i.open for i in items) else ""
    return (
        f'<figure class="timeline" aria-label="Trace timeline"{grows}>'
        f'<div class="axis"><span class="row-label">time</span><span class="track">'
        f'<span>{when(t0)}</span><span class="tl-span">+{span:.3f} s</span></span></div>'
        f'<ol class="rows">{"".join(rows)}</ol></figure>'
    )


def detail_fragment(
    job: JobView | None,
    session: SessionDetail | None,
    task: str | None,
    files: Sequence[tuple[str, str]],
    items: Sequence[Item],
    t0: int,
    t1: int,
    *,
    children: Sequence[tuple[str, str]] = (),
    tree_html: str = "",
    trace_url: str | None = None,
) -> str:
    """A job's or session's page. ``children`` are its delegations (session id, capsule), linked;
    ``tree_html`` is its delegation tree's timeline; ``trace_url`` its trace in the operator's UI."""
    src: JobView | SessionDetail | None = job or session
    live = (job["state"] if job else session["status"] if session else "") in ("running", "starting")
    state = (job["state"] if job else None) or (session["status"] if session else None) or "unknown"
    capsule = f"{src['name']}@{src['version']}" if src else "None@None"
    rows: list[tuple[str, str]] = [("capsule", _e(capsule)), ("state", state_badge(state))]
    if job:
        rows += [("job", _e(job["job_id"])), ("session", _e(job["session_id"]))]
        parent = job["parent_session_id"]
        rows.append(("parent", f'<a href="/session/{_e(parent)}">{_e(parent)}</a>' if parent else "top-level"))
        rows += [("started", when(job["created_ms"])), ("ended", when(job["ended_ms"]))]
        if job["ended_ms"]:
            rows += [
                ("exit", _e(job["exit_status"])),
                ("outcome", _e(job["outcome"])),
                ("reason", _e(job["reason"])),
            ]
    elif session:
        rows += [("session", _e(session["session_id"])), ("started", when(session["created_ms"]))]
        rows.append(("ended", when(session["ended_ms"])))
    rows.append(("workdir", f"<code>{_e(src['workdir'] if src else None)}</code>"))
    if children:
        links = ", ".join(
            f'<a href="/session/{_e(sid)}">{_e(capsule)}</a> <code>{_e(sid)}</code>' for sid, capsule in children
        )
        rows.append(("delegated to", links))
    if trace_url:
        rows.append(
            ("trace", f'<a class="trace" href="{_e(trace_url)}" rel="noreferrer" target="_blank">open its trace</a>')
        )
    comp = job["completion"] if job else None
    completion = (
        _pairs((k, _e(_plain(v))) for k, v in comp.items())
        if isinstance(comp, dict)
        else '<p class="empty">None yet.</p>'
    )
    result_files = "".join(f"<li><code>{_e(name)}</code><pre>{_e(text)}</pre></li>" for name, text in files)
    actions = []
    if job and state not in FINAL_JOB_STATES:
        actions.append(
            f'<button type="button" class="danger" data-action="cancel" data-id="{_e(job["job_id"])}"'
            f' data-label="job {_e(job["job_id"])} ({_e(capsule)})">Cancel this job…</button>'
        )
    sid = (session["session_id"] if session else None) or (job["session_id"] if job else None)
    if sid and (session["status"] if session else "running") == "running" and state not in FINAL_JOB_STATES:
        also = " and its job" if job else ""
        actions.append(
            f'<button type="button" class="danger" data-action="end" data-id="{_e(sid)}"'
            f' data-label="session {_e(sid)} ({_e(capsule)}){also}">End this session{also}…</button>'
        )
    task_text = _e(task) if task is not None else "(no input.json)"
    return f"""<section aria-labelledby="h-summary"><h2 id="h-summary">{_e(capsule)} {state_badge(state)}</h2>
{_pairs(rows)}
<div class="actions">{"".join(actions)}</div></section>
<section aria-labelledby="h-input"><h2 id="h-input">Input</h2><pre>{task_text}</pre></section>
<section aria-labelledby="h-completion"><h2 id="h-completion">Completion</h2>{completion}</section>
<section aria-labelledby="h-files"><h2 id="h-files">Result files</h2>
{f'<ul class="files">{result_files}</ul>' if files else f'<p class="empty">{_no_files(state)}</p>'}</section>
{f'<section aria-labelledby="h-tree"><h2 id="h-tree">Delegation tree</h2>{tree_html}</section>' if tree_html else ""}
<section aria-labelledby="h-trace"><h2 id="h-trace">Trace</h2>{_timeline(items, t0, t1, live=live)}</section>"""


def _no_files(state: str) -> str:
    if state in FINAL_JOB_STATES:
        return f"None: the job ended ({state}) without writing a file in out/."
    return "None yet: files the task writes in out/ appear here."

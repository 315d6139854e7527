"""The dashboard's list pages and its sentences (pure): jobs with filters and paging, events,
the page for a missing token, and what a stopped daemon looks like.

Filters are a plain ``GET`` form (state, capsule, uid, an id or part of one), so a filtered view
is a URL an operator can keep; paging shows :data:`PAGE` jobs at a time, running ones first, then
ended ones newest first, each with its end time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from urllib.parse import urlencode

from roost.core.admin_models import JobView, ObserveEvent
from roost.core.wire import JOB_STATES
from roost.dashboard.render import state_badge, when

__all__ = [
    "PAGE",
    "JobFilter",
    "events_page",
    "filter_jobs",
    "jobs_form",
    "jobs_page",
    "token_page",
]

PAGE = 25


def _e(value: object) -> str:
    return escape("-" if value is None else str(value), quote=True)


@dataclass(frozen=True, slots=True)
class JobFilter:
    state: str = ""
    capsule: str = ""
    uid: str = ""
    q: str = ""
    page: int = 1

    @classmethod
    def of(cls, query: dict[str, str]) -> JobFilter:
        state = query.get("state", "")
        try:
            page = max(1, int(query.get("page", "1")))
        except ValueError:
            page = 1
        return cls(
            state=state if state in JOB_STATES else "",
            capsule=query.get("capsule", "").strip()[:200],
            uid=query.get("uid", "").strip()[:20],
            q=query.get("q", "").strip()[:200],
            page=page,
        )

    def keeps(self, job: JobView) -> bool:
        if self.state and job["state"] != self.state:
            return False
        if self.capsule and self.capsule not in f"{job['name']}@{job['version']}":
            return False
        if self.uid and str(job.get("uid")) != self.uid:
            return False
        ids = (job["job_id"], job["session_id"] or "", job["parent_session_id"] or "", job["delegation_id"])
        return not self.q or any(self.q in i for i in ids)

    def link(self, page: int) -> str:
        query = {k: v for k, v in (("state", self.state), ("capsule", self.capsule), ("uid", self.uid), ("q", self.q))}
        return "/jobs?" + urlencode({k: v for k, v in query.items() if v} | {"page": page})


def filter_jobs(jobs: Sequence[JobView], f: JobFilter) -> tuple[list[JobView], int]:
    """One page of the jobs ``f`` keeps (running first, then ended newest first) and how many it keeps."""
    kept = [j for j in jobs if f.keeps(j)]
    kept.sort(key=lambda j: (j["ended_ms"] is not None, -(j["ended_ms"] or j["created_ms"])))
    start = (f.page - 1) * PAGE
    return kept[start : start + PAGE], len(kept)


def _select(f: JobFilter) -> str:
    options = "".join(
        f'<option value="{s}"{" selected" if s == f.state else ""}>{s or "any state"}</option>'
        for s in ("", *JOB_STATES)
    )
    return f'<select id="f-state" name="state">{options}</select>'


def jobs_form(f: JobFilter) -> str:
    """The filters, outside the live part of the page (a refresh must not undo what is typed)."""
    return (
        '<form class="filters" method="get" action="/jobs" role="search" aria-label="Filter jobs">'
        f'<label for="f-state">state</label>{_select(f)}'
        f'<label for="f-capsule">capsule</label><input id="f-capsule" name="capsule" value="{_e(f.capsule)}"'
        ' placeholder="name or name@version">'
        f'<label for="f-uid">uid</label><input id="f-uid" name="uid" value="{_e(f.uid)}" inputmode="numeric" size="6">'
        f'<label for="f-q">id</label><input id="f-q" name="q" value="{_e(f.q)}" placeholder="job_…, ses_…, dlg_…">'
        '<button type="submit">Filter</button> <a href="/jobs">clear</a></form>'
    )


def jobs_page(page: Sequence[JobView], total: int, f: JobFilter) -> str:
    """One page of jobs and the pager (the live part of the jobs page)."""
    if not page:
        body = '<p class="empty">No job matches these filters.</p>'
    else:
        rows = "".join(
            f'<tr data-job="{_e(j["job_id"])}" data-state="{_e(j["state"])}">'
            f'<td><a href="/job/{_e(j["job_id"])}"><code>{_e(j["job_id"])}</code></a></td>'
            f"<td>{_e(j['name'])}@{_e(j['version'])}</td><td>{state_badge(j['state'])}</td>"
            f"<td>{_e(j.get('uid'))}</td><td>{when(j['created_ms'])}</td><td>{when(j['ended_ms'])}</td>"
            f"<td>{_parent(j)}</td></tr>"
            for j in page
        )
        body = (
            '<table class="jobs"><thead><tr><th scope="col">job</th><th scope="col">capsule</th>'
            '<th scope="col">state</th><th scope="col">uid</th><th scope="col">started</th>'
            f'<th scope="col">ended</th><th scope="col">parent</th></tr></thead><tbody>{rows}</tbody></table>'
        )
    last = max(1, -(-total // PAGE))
    nav = [f'<span class="count">{total} job(s), page {min(f.page, last)} of {last}</span>']
    if f.page > 1:
        nav.insert(0, f'<a rel="prev" href="{_e(f.link(f.page - 1))}">← newer</a>')
    if f.page < last:
        nav.append(f'<a rel="next" href="{_e(f.link(f.page + 1))}">older →</a>')
    return f'<nav class="pager" aria-label="Pages">{" ".join(nav)}</nav>{body}'


def _parent(job: JobView) -> str:
    parent = job["parent_session_id"]
    return f'<a href="/session/{_e(parent)}">{_e(parent)}</a>' if parent else "top-level"


def event_row(ev: ObserveEvent) -> str:
    kind = ev["type"].removeprefix("operation.")
    attrs = " ".join(f"{k.split('.')[-1]}={v}" for k, v in (ev.get("attributes") or {}).items())
    took = f" {ev['durationMs']:.1f} ms" if "durationMs" in ev else ""
    return (
        f'<li class="ev" data-type="{_e(ev["type"])}" data-operation="{_e(ev.get("operation"))}">'
        f"{when(ev.get('timestamp'))} <strong>{_e(ev.get('operation'))}</strong> "
        f'<span class="badge" data-state="{_e(kind)}">{_e(kind)}</span>{_e(took)}'
        f' <span class="meta">{_e(attrs)}</span></li>'
    )


def events_page(events: Sequence[ObserveEvent], q: str) -> str:
    """The daemon's recent observation events, newest first, filterable; the script adds live ones."""
    shown = [ev for ev in events if not q or q in f"{ev.get('operation')} {ev['type']} {ev.get('attributes')}"]
    rows = "".join(event_row(ev) for ev in reversed(shown))
    return (
        '<form class="filters" method="get" action="/eventlog" role="search" aria-label="Filter events">'
        f'<label for="ev-q">show only events containing</label><input id="ev-q" name="q" value="{_e(q)}"'
        ' placeholder="roost.relay, failed, job_…"><button type="submit">Filter</button> <a href="/eventlog">clear</a>'
        f'</form><ol id="events" class="events" data-q="{_e(q)}" aria-live="polite">{rows}</ol>'
        + ("" if rows else '<p class="empty" id="no-events">No event yet.</p>')
    )


def token_page() -> str:
    """What a request without this run's token or cookie is told (the uid and host checks passed)."""
    return (
        "<h2>This dashboard needs its link</h2>"
        "<p>Open the URL that <code>roostctl dashboard</code> printed when it started: it carries a "
        "token for this run, which the page trades for a cookie. A bookmark of the bare address, or a URL "
        "from an earlier run, does not work.</p>"
        "<p>To get a valid URL, run <code>roostctl dashboard</code> again (as the daemon's user) and open the "
        "first line it prints.</p>"
    )

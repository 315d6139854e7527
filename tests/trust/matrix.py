"""The route × caller matrix's common half: caller classes, the table's expected answer, a ledger.

Every listener's routes are enumerated from its running application; each (listener, route,
caller class) cell is one real request to that application, and its answer is compared with
what the authorization table decides for that caller (:func:`roost.core.authz.decide` over the
facts the listener gathers, below) — the status and the refusal sentence — or, where the table
lets the caller through, with what the route's own check answers (its :class:`Expect`). A
route that is running but has no sample, or a cell that was not driven, fails the ledger.

The caller classes (docs/security.md, "Who may call what"); each module says which it drives:

* ``root``: uid 0, on this host, not inside a job, no token;
* ``other_uid``: a client forked to uid 65534 (tests/trust/attacker.py), no token;
* ``forged``: root presenting a made-up credential, approval and keeper token (no valid one);
* ``own``: root with the credential of the session that owns what the route names (the job's
  parent; for the dashboard, its owner's browser with the cookie);
* ``other_session``: root with another running session's credential;
* ``cross_site``: a browser page on another site (a foreign ``Origin``; a simple POST body);
* ``rebound``: a page whose DNS name was rebound to this host (a foreign ``Host``);
* ``in_capsule``: a process inside a contained (``scoped``) capsule of root's;
* ``entrypoint``: that capsule's entrypoint at its own session's host socket;
* ``remote`` / ``remote_token``: a caller on the ``listen`` listener, from another address, with
  no token / with the token the route names.

A class that cannot reach a listener is not a cell: a browser reaches no unix socket (the admin
and host sockets), a capsule door and the dashboard listen on loopback only (no remote caller),
and only the daemon's TCP routes read a credential or approval.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp

from roost.core.authz import FORBIDDEN, CallerFacts, Denial, Listener, decide
from roost.http.authz import TABLES, policy_for

__all__ = [
    "BROWSER_POST",
    "CALLER_FACTS",
    "EVIL_HOST",
    "EVIL_ORIGIN",
    "FORGED",
    "Expect",
    "Ledger",
    "Sample",
    "facts_for",
    "send",
    "table_answer",
]

EVIL_ORIGIN = "http://evil.example"
EVIL_HOST = "evil.example:7700"
FORGED = "msc1.AAAA.BBBB"
BROWSER_POST = "text/plain;charset=UTF-8"
"""A cross-site page's POST carries a simple content type (no preflight): its body as text."""

_ME = 0  # these tests run as root, which is also every listener's own uid here
NOBODY = 65534

CALLER_FACTS: Mapping[str, CallerFacts] = {
    "root": CallerFacts(uid=_ME, local=True, daemon_uid=_ME),
    "other_uid": CallerFacts(uid=NOBODY, local=True, daemon_uid=_ME),
    "forged": CallerFacts(uid=_ME, local=True, daemon_uid=_ME),
    "own": CallerFacts(uid=_ME, local=True, daemon_uid=_ME),
    "other_session": CallerFacts(uid=_ME, local=True, daemon_uid=_ME),
    "cross_site": CallerFacts(uid=_ME, local=True, daemon_uid=_ME, cross_site=True),
    "rebound": CallerFacts(uid=_ME, local=True, daemon_uid=_ME, host_ok=False),
    "in_capsule": CallerFacts(uid=_ME, local=True, daemon_uid=_ME, in_job=True),
    "entrypoint": CallerFacts(uid=_ME, local=True, daemon_uid=_ME, in_job=True, entrypoint=True),
    "remote": CallerFacts(uid=None, local=False, daemon_uid=_ME),
    "remote_token": CallerFacts(uid=None, local=False, daemon_uid=_ME, credential=True, approval=True, keeper=True),
}
"""What each class is, as a listener that looks at everything would see it."""


def facts_for(listener: Listener, caller: str) -> CallerFacts:
    """The facts ``listener`` itself gathers about ``caller``: the daemon's TCP app asks no
    process whether it is inside a job (its job routes do, per job); the admin socket and the
    host socket read no ``Host``/``Origin`` (no browser reaches a unix socket)."""
    facts = CALLER_FACTS[caller]
    if listener in (Listener.DAEMON, Listener.DOOR, Listener.DASHBOARD):
        facts = replace(facts, in_job=False)
    if listener is not Listener.HOST_SOCKET:
        facts = replace(facts, entrypoint=False)
    return facts


def table_answer(listener: Listener, key: tuple[str, str], caller: str) -> Denial | None:
    """The table's decision for this cell: a refusal, or None (the route's own check answers)."""
    return decide(policy_for(TABLES[listener], *key), facts_for(listener, caller))


@dataclass(frozen=True)
class Expect:
    """What the route answers a caller the table let through: a status, and the sentence of
    the route's own refusal where it refuses (``error``), or a part of it (``contains``)."""

    status: int
    error: str | None = None
    contains: str | None = None


@dataclass(frozen=True)
class Sample:
    """A concrete request for a route: its path with live ids, a JSON body, extra headers."""

    method: str
    path: str
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


def sentence_of(body: Any) -> str | None:
    """The refusal sentence an answer carries: ``{"error": …}`` (the dashboard: its bare text)."""
    if isinstance(body, dict):
        error = body.get("error")
        return error if isinstance(error, str) else None
    if isinstance(body, str):
        return body.strip()
    return None


def _rendered(listener: Listener, denial: Denial) -> str:
    """A denial as the listener writes it: the dashboard says only ``forbidden`` to anyone."""
    return FORBIDDEN if listener is Listener.DASHBOARD else denial.sentence


STREAMS = ("text/event-stream", "application/x-ndjson")


async def send(
    url: str, sample: Sample, headers: Mapping[str, str] | None = None, *, data: str | None = None
) -> tuple[int, Any]:
    """One request from this (root) process; ``url`` is ``http://host:port`` or ``unix:/path``.
    A streaming answer is read no further than its status."""
    connector = aiohttp.UnixConnector(path=url.removeprefix("unix:")) if url.startswith("unix:") else None
    base = "http://localhost" if connector is not None else url
    merged = {**sample.headers, **(headers or {})}
    kwargs: dict[str, Any] = {"data": data} if data is not None else {"json": sample.body}
    timeout = aiohttp.ClientTimeout(total=60)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=timeout) as http,
        http.request(sample.method, base + sample.path, headers=merged, allow_redirects=False, **kwargs) as resp,
    ):
        if resp.content_type in STREAMS:
            return resp.status, None
        raw = await resp.read()
    try:
        return resp.status, json.loads(raw)
    except ValueError:
        return resp.status, raw.decode("utf-8", "replace")


@dataclass
class Ledger:
    """The cells of one listener driven by one test: every answer checked, every gap reported."""

    listener: Listener
    keys: list[tuple[str, str]]
    wrong: list[str] = field(default_factory=list)
    driven: set[tuple[tuple[str, str], str]] = field(default_factory=set)

    def check(self, key: tuple[str, str], caller: str, got: tuple[int, Any], allowed: Expect | None) -> None:
        """Compare one answer with the table's (``allowed``: what the route answers when the
        table lets this caller through; None where the test expects the table to refuse)."""
        self.driven.add((key, caller))
        status, body = got
        denial = table_answer(self.listener, key, caller)
        said = sentence_of(body)
        if denial is not None:
            want = (denial.status, _rendered(self.listener, denial))
            if (status, said) != want:
                self.wrong.append(f"{key} as {caller}: table says {want}, got {status} {str(body)[:200]!r}")
            return
        if allowed is None:
            self.wrong.append(f"{key} as {caller}: the table lets it through, got {status} {str(body)[:200]!r}")
            return
        refusals = {d.sentence for d in _TABLE_REFUSALS}
        if said in refusals:
            self.wrong.append(f"{key} as {caller}: the table allows it, yet it was refused with {said!r}")
        elif status != allowed.status:
            self.wrong.append(f"{key} as {caller}: expected {allowed.status}, got {status} {str(body)[:200]!r}")
        elif allowed.error is not None and said != allowed.error:
            self.wrong.append(f"{key} as {caller}: expected {allowed.error!r}, got {str(body)[:200]!r}")
        elif allowed.contains is not None and allowed.contains not in str(body):
            self.wrong.append(f"{key} as {caller}: expected {allowed.contains!r} in {str(body)[:200]!r}")

    def finish(self, callers: Iterable[str]) -> None:
        """Every running route was driven as every caller named, and every answer was right."""
        missing = [(k, c) for k in self.keys for c in callers if (k, c) not in self.driven]
        assert not missing, f"{self.listener.value}: cells not driven: {missing}"
        assert not self.wrong, f"{self.listener.value}: " + "\n".join(self.wrong)


def _all_refusals() -> list[Denial]:
    """Every sentence the table can refuse with (to tell a table refusal in an allowed cell)."""
    found: dict[str, Denial] = {}
    for table in TABLES.values():
        for policy in table.values():
            for facts in CALLER_FACTS.values():
                denial = decide(policy, facts)
                if denial is not None and denial.sentence != FORBIDDEN:
                    found[denial.sentence] = denial
    return list(found.values())


_TABLE_REFUSALS = _all_refusals()


def unix(path: Path | str) -> str:
    return f"unix:{path}"

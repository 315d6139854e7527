"""Interleaved duplicate registers, spawns, redeems, deregisters, operator ends, job launches and
job cancels at a real daemon, against a sequential model.

Each example is a list of waves; the operations of a wave are fired at once, the waves one after
another. The daemon must behave like *some* sequential order of each wave (linearizable): every
wave's answers must be those of a sequential model run in one of the wave's orders, and the
daemon's state afterwards (which sessions run, which approvals are spent or still hold a slot)
must equal that model's (and so must each job's: live, or ended by a cancel, with one
completion.json; or, when its parent ended first, ended with none). Job cancels come in
duplicates — by the parent's credential and by the operator's admin socket — and race the
parent's deregistration.

The state is read three ways: the daemon's memory; ``roost.db`` through a read-only sqlite3
connection of the test's own (each session's row and status, each spent approval id), after
every wave; and, after each example, the counters the daemon exposes (the admin ``/status``
running sessions, per uid and reserved slots, ``roost_capsules`` in ``/metrics``, and
``live_capsules`` in ``GET /status/{id}``), which must have moved from where the example found
them by exactly what the model says, and be back there once the example's sessions are ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import sqlite3
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from roost.core import tokens
from roost.services.launcher.service import PARENT_ENDED_REASON
from roost.state.registry.packing import pack_capsule
from tests.support.daemon import RunningDaemon
from tests.support.registry import EXAMPLES, RegistryBuilder

CRED = "x-murmur-spawn-credential"
APPROVAL = "x-murmur-spawn-approval"
TOPS, KIDS = 2, 3
WORKROOT = Path(tempfile.mkdtemp(prefix="roost-model-"))
MAX_JOBS = 2  # real child processes: a few per example keep the test in seconds

Op = tuple[Any, ...]
ops = st.one_of(
    st.tuples(st.just("reg"), st.integers(0, TOPS - 1)),
    st.tuples(st.just("spawn"), st.integers(0, TOPS + KIDS - 1)),
    st.tuples(st.just("redeem"), st.integers(0, 5), st.integers(0, KIDS - 1)),
    st.tuples(st.just("dereg"), st.integers(0, TOPS + KIDS - 1)),
    st.tuples(st.just("cancel"), st.integers(0, TOPS + KIDS - 1)),
    st.tuples(st.just("launch"), st.integers(0, TOPS - 1)),
    st.tuples(st.just("jcancel"), st.integers(0, MAX_JOBS - 1), st.booleans()),
)
waves = st.lists(st.lists(ops, min_size=1, max_size=4), min_size=1, max_size=5)


@dataclass(frozen=True)
class Model:
    running: frozenset[str] = frozenset()
    ended: frozenset[str] = frozenset()
    parent_of: tuple[tuple[str, str], ...] = ()  # approval index → parent session
    spent: frozenset[int] = frozenset()
    jobs: tuple[tuple[str, str], ...] = ()  # job index → (parent session, live|canceled|orphaned)

    def known(self, sid: str) -> bool:
        return sid in self.running or sid in self.ended

    def holds(self, idx: int) -> bool:
        """Approval ``idx`` still holds its slot: not spent, and its parent still runs."""
        return idx not in self.spent and dict(self.parent_of)[str(idx)] in self.running

    def held(self) -> int:
        return sum(self.holds(int(idx)) for idx, _ in self.parent_of)

    def end(self, sid: str) -> Model:
        """``sid`` ends: its live jobs lose their parent (their lifelines close; they may still be
        stopping, and how they end is the launcher's business, so the model leaves it open)."""
        jobs = tuple((p, "orphaned" if p == sid and st == "live" else st) for p, st in self.jobs)
        return replace(self, running=self.running - {sid}, ended=self.ended | {sid}, jobs=jobs)

    def step(
        self, op: Op, names: list[str], creds: dict[str, str], approvals: list[str], new_approval: int
    ) -> tuple[int, Model]:
        kind = op[0]
        if kind == "skip":
            return -1, self
        if kind == "launch":
            sid = names[op[1]]
            if sid not in creds or sid not in self.running:
                return 403, self
            return 201, replace(self, jobs=(*self.jobs, (sid, "live")))
        if kind == "jcancel":
            if not self.jobs:
                return -1, self
            idx = op[1] % len(self.jobs)
            parent, state = self.jobs[idx]
            if not op[2] and parent not in self.running:  # the parent's credential no longer works
                return 403, self
            if state != "live":
                return 200, self  # already ended (or ending): the answer is the job as it stands
            jobs = list(self.jobs)
            jobs[idx] = (parent, "canceled")
            return 200, replace(self, jobs=tuple(jobs))
        if kind == "reg":
            sid = names[op[1]]
            if self.known(sid):
                return 403, self
            return 200, replace(self, running=self.running | {sid})
        if kind == "spawn":
            sid = names[op[1]]
            if op[1] >= TOPS or sid not in creds or sid not in self.running:
                return 403, self  # a worker may spawn nothing (its spawn allow list is empty)
            return 200, replace(self, parent_of=(*self.parent_of, (str(new_approval), sid)))
        if kind == "redeem":
            if not approvals:
                return -1, self
            idx = op[1] % len(approvals)
            kid = names[TOPS + op[2]]
            if self.known(kid):
                return 403, self
            if idx in self.spent:
                return 403, self
            parent = dict(self.parent_of)[str(idx)]
            spent = self.spent | {idx}
            if parent not in self.running:
                return 403, replace(self, spent=spent)
            return 200, replace(self, spent=spent, running=self.running | {kid})
        sid = names[op[1]]
        if kind == "cancel":  # the operator ends it (admin socket): no credential needed
            if sid in self.running:
                return 200, self.end(sid)
            return (409 if sid in self.ended else 404), self
        if sid not in creds or sid not in self.running:
            return 403, self
        return 200, self.end(sid)


async def _fire(
    d: RunningDaemon, op: Op, names: list[str], creds: dict[str, str], approvals: list[str], jobs: list[Any]
) -> tuple[int, Any]:
    kind = op[0]
    if kind == "skip":
        return -1, None
    if kind == "launch":
        cred = creds.get(names[op[1]], "msc1.bogus")
        body = {"name": "sleeper", "version": "0.1.0", "task": "600"}
        status, answer, _, _ = await d.call("POST", "/jobs", json=body, headers={CRED: cred})
        # 409 only when the parent ended after the grant (the child's /register was refused).
        ended = status == 409 and "parent session ended" in answer["error"]
        assert status in (201, 403) or ended, (op, status, answer)
        return status, answer
    if kind == "jcancel":
        if not jobs:
            return -1, None
        job = jobs[op[1] % len(jobs)]
        if op[2]:
            status, answer = await _operator_cancel(d, job["job_id"])
        else:
            headers = {CRED: creds[job["parent"]]}
            status, answer, _, _ = await d.call("POST", f"/jobs/{job['job_id']}/cancel", headers=headers)
        assert status in (200, 403), (op, status, answer)
        assert status != 200 or answer["job_id"] == job["job_id"], answer
        return status, answer
    if kind == "reg":  # a workdir, so that the top may delegate through POST /jobs
        workdir = WORKROOT / names[op[1]]
        workdir.mkdir(parents=True, exist_ok=True)
        body = {"session_id": names[op[1]], "name": "orchestrator", "version": "0.1.0", "workdir": str(workdir)}
        status, answer, _, _ = await d.call("POST", "/register", json=body)
    elif kind == "spawn":
        cred = creds.get(names[op[1]], "msc1.bogus")
        status, answer, _, _ = await d.call(
            "POST", "/spawn", json={"name": "worker", "version": "0.1.0"}, headers={CRED: cred}
        )
    elif kind == "redeem":
        if not approvals:
            return -1, None
        body = {"session_id": names[TOPS + op[2]], "name": "worker", "version": "0.1.0"}
        headers = {APPROVAL: approvals[op[1] % len(approvals)]}
        status, answer, _, _ = await d.call("POST", "/register", json=body, headers=headers)
    elif kind == "cancel":
        status, answer = await _operator_end(d, names[op[1]])
        assert status in (200, 404, 409), (op, status, answer)
        return status, answer
    else:
        cred = creds.get(names[op[1]], "msc1.bogus")
        status, answer, _, _ = await d.call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: cred})
    assert status in (-1, 200, 403), (op, status, answer)
    return status, answer


async def _admin(d: RunningDaemon, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One request to the daemon's admin socket: its status and body (JSON, else text)."""
    async with (
        aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(d.config.admin_socket_path))) as admin,
        admin.request(method, f"http://admin{path}", json=body) as resp,
    ):
        if resp.content_type == "application/json":
            return resp.status, await resp.json()
        return resp.status, await resp.text()


async def _operator_cancel(d: RunningDaemon, job_id: str) -> tuple[int, Any]:
    return await _admin(d, "POST", f"/jobs/{job_id}/cancel")


async def _operator_end(d: RunningDaemon, sid: str) -> tuple[int, Any]:
    return await _admin(d, "POST", f"/sessions/{sid}/end", {"reason": "model"})


@dataclass(frozen=True)
class Counters:
    running: int
    uid_live: int
    reserved: int


_GAUGE = re.compile(r'^roost_capsules\{state="(running|reserved)"\} (\S+)$', re.MULTILINE)


async def _counters(d: RunningDaemon) -> Counters:
    """The live counts as the daemon exposes them, each checked against the others: the admin
    ``/status``, the ``roost_capsules`` gauges of ``/metrics`` and the ``live_capsules`` of
    ``GET /status/{id}`` (answered for any known session; the probe's)."""
    status, body = await _admin(d, "GET", "/status")
    assert status == 200, body
    sessions = body["sessions"]
    status, text = await _admin(d, "GET", "/metrics")
    assert status == 200, text
    gauges = {state: float(v) for state, v in _GAUGE.findall(text)}
    assert gauges == {"running": sessions["running"], "reserved": sessions["reserved_slots"]}, (gauges, sessions)
    status, probe, _, _ = await d.call("GET", f"/status/{PROBE}")
    assert status == 200, probe
    assert probe["live_capsules"] == sessions["running"] + sessions["reserved_slots"], (probe, sessions)
    by_uid = sessions["running_by_uid"]
    assert sum(by_uid.values()) == sessions["running"], sessions
    return Counters(sessions["running"], by_uid.get(str(os.getuid()), 0), sessions["reserved_slots"])


def _db_state(d: RunningDaemon, names: list[str]) -> tuple[dict[str, str], set[str]]:
    """What ``roost.db`` holds, read on a read-only connection of the test's own: the status of
    each named session that has a row, and every spent approval id."""
    db = d.config.state_dir / "roost.db"
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        marks = ",".join("?" * len(names))
        rows = conn.execute(f"SELECT session_id, status FROM sessions WHERE session_id IN ({marks})", names)
        statuses = {str(sid): str(st) for sid, st in rows}
        spent = {str(jti) for (jti,) in conn.execute("SELECT jti FROM spent")}
    return statuses, spent


def _capped(plan: list[list[Op]]) -> list[list[Op]]:
    """The plan with launches past the first ``MAX_JOBS`` turned into no-ops."""
    launches = 0
    out: list[list[Op]] = []
    for wave in plan:
        kept: list[Op] = []
        for op in wave:
            if op[0] == "launch":
                launches += 1
                if launches > MAX_JOBS:
                    op = ("skip",)
            kept.append(op)
        out.append(kept)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=waves)
@example(plan=[[("reg", 0)], [("spawn", 0), ("spawn", 0)], [("redeem", 0, 0), ("redeem", 0, 1)], [("spawn", 2)]])
@example(plan=[[("reg", 0), ("reg", 0)], [("spawn", 0), ("cancel", 0)], [("redeem", 0, 0), ("dereg", 0)]])
@example(  # parallel duplicate job cancels, by the parent and by the operator
    plan=[[("reg", 0)], [("launch", 0)], [("jcancel", 0, False), ("jcancel", 0, True), ("jcancel", 0, False)]]
)
@example(  # job cancels racing the parent's deregistration
    plan=[[("reg", 0)], [("launch", 0), ("launch", 0)], [("jcancel", 0, False), ("dereg", 0), ("jcancel", 1, True)]]
)
async def test_interleavings_match_a_sequential_model(
    plan: list[list[Op]], daemon_factory: Any, registry: RegistryBuilder
) -> None:
    d = await _daemon(daemon_factory, registry)
    plan = _capped(plan)
    tag = os.urandom(4).hex()
    names = [f"ses_{tag}t{i:07x}" for i in range(TOPS)] + [f"ses_{tag}k{i:07x}" for i in range(KIDS)]
    creds: dict[str, str] = {}
    approvals: list[str] = []
    jobs: list[Any] = []  # each launched job's view, with "parent" added
    candidates = {Model()}
    before = await _counters(d)
    try:
        for wave in plan:
            candidates = await _wave(d, wave, candidates, names, creds, approvals, jobs)
            db = _db_state(d, names)
            assert any(_matches(d, m, names, approvals, jobs, db) for m in candidates), (
                "the state matches no model",
                db,
            )
    finally:
        for job in jobs:  # leave no sleeper behind for the next example
            status, answer = await _operator_cancel(d, job["job_id"])
            assert status == 200, answer
    # The jobs are over: what the counters moved by is the model's running sessions and slots.
    after = await _counters(d)
    moved = (after.running - before.running, after.uid_live - before.uid_live, after.reserved - before.reserved)
    assert any(moved == (len(m.running), len(m.running), m.held()) for m in candidates), (moved, candidates)
    # Ending every session the example left running gives every place back: no phantom.
    for sid in names:
        status, answer = await _operator_end(d, sid)
        assert status in (200, 404, 409), answer
    assert await _counters(d) == before
    # However many cancels raced, each job ended once, and the first reason it was stopped for
    # decides its record: a job cancelled before its parent ended has the launcher's terminated
    # completion.json (posted to nobody if the parent is gone); one whose parent ended first has none.
    ended = [_ending(d, view) for view in jobs]
    assert any(
        all(
            outcome == ("none" if state == "orphaned" else "completion")
            for (_, state), outcome in zip(m.jobs, ended, strict=True)
        )
        for m in candidates
    ), (ended, candidates)


def _ending(d: RunningDaemon, view: dict[str, Any]) -> str:
    """``completion`` (one completion.json, terminated) or ``none`` (no completion, parent ended)."""
    job = d.roost.launcher.jobs[view["job_id"]]
    assert job.final and job.state == "terminated", job
    completions = [p.name for p in Path(job.workdir).iterdir() if p.name.startswith("completion")]
    assert completions in ([], ["completion.json"]), (job, completions)
    if not completions:
        assert job.reason == PARENT_ENDED_REASON, job
        return "none"
    return "completion"


def _parent_ends_in(wave: list[Op], parent: int) -> bool:
    """The same wave deregisters or ends the launching session (an operator end is ``cancel``)."""
    return any(op[0] in ("dereg", "cancel") and op[1] == parent for op in wave)


async def _wave(
    d: RunningDaemon,
    wave: list[Op],
    candidates: set[Model],
    names: list[str],
    creds: dict[str, str],
    approvals: list[str],
    jobs: list[Any],
) -> set[Model]:
    """Fire one wave at once; return the models of every sequential order that explains it."""
    answers = await asyncio.gather(*(_fire(d, op, names, creds, approvals, jobs) for op in wave))
    statuses = [s for s, _ in answers]
    fresh = [i for i, op in enumerate(wave) if op[0] == "spawn" and statuses[i] == 200]
    launched = [i for i, op in enumerate(wave) if op[0] == "launch" and statuses[i] == 201]
    nxt: set[Model] = set()
    for model in candidates:
        for order in itertools.permutations(range(len(wave))):
            m, ok = model, True
            if [i for i in order if i in launched] != launched:
                continue  # launched jobs are numbered in wave order below; other orders are renumberings
            for i in order:
                new_idx = len(approvals) + fresh.index(i) if i in fresh else -1
                status, after = m.step(wave[i], names, creds, approvals, new_idx)
                if status == 201 and statuses[i] == 409 and _parent_ends_in(wave, wave[i][1]):
                    continue  # granted, then the parent ended before the child registered: no job
                m = after
                if status != statuses[i]:
                    ok = False
                    break
            if ok:
                nxt.add(m)
    assert nxt, f"no sequential order explains {list(zip(wave, statuses, strict=True))}"
    for i, op in enumerate(wave):
        if statuses[i] != 200:
            continue
        if op[0] == "reg":
            creds[names[op[1]]] = answers[i][1]["credential"]
        elif op[0] == "redeem":
            creds[names[TOPS + op[2]]] = answers[i][1]["credential"]
    approvals += [answers[i][1]["approval"] for i in fresh]
    jobs += [{**answers[i][1], "parent": names[wave[i][1]]} for i in launched]
    return nxt


_DAEMON: dict[int, RunningDaemon] = {}
PROBE = f"ses_probe{os.urandom(6).hex()}"


async def _daemon(factory: Any, registry: RegistryBuilder) -> RunningDaemon:
    """One daemon per test run (the factory's), shared by the examples: each uses its own ids."""
    key = id(factory)
    if key not in _DAEMON:
        registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker", "sleeper"]}})
        registry.add("worker")
        pack_capsule(EXAMPLES / "capsules" / "sleeper", registry.root)
        _DAEMON.clear()
        d = await factory(
            registry.root,
            spawn_allow=("orchestrator",),
            max_concurrent=1000,
            max_live_capsules=100_000,
            stop_grace_secs=1.0,
        )
        await d.register_top("orchestrator", session_id=PROBE)  # whose /status/{id} tells live_capsules
        _DAEMON[key] = d
    return _DAEMON[key]


def _matches(
    d: RunningDaemon,
    m: Model,
    names: list[str],
    approvals: list[str],
    jobs: list[Any],
    db: tuple[dict[str, str], set[str]],
) -> bool:
    table = d.roost.table
    rows, spent_rows = db
    for (_, state), view in zip(m.jobs, jobs, strict=True):
        job = d.roost.launcher.jobs[view["job_id"]]
        if state == "live" and job.final:
            return False
        if state == "canceled" and job.state != "terminated":
            return False
    for sid in names:
        rec = table.get(sid)
        if sid in m.running and (rec is None or not rec.running):
            return False
        if sid in m.ended and (rec is None or rec.running):
            return False
        if not m.known(sid) and rec is not None:
            return False
        # roost.db agrees: every answered registration and end was committed before its answer.
        if sid in m.running and rows.get(sid) != "running":
            return False
        if sid in m.ended and rows.get(sid) not in ("complete", "failed"):
            return False
        if not m.known(sid) and sid in rows:
            return False
    for idx, approval in enumerate(approvals):
        claims = tokens.verify_approval(d.keys.approval_key, approval, now_ms=0)
        if (claims.jti in table.spent) != (idx in m.spent):
            return False
        if (claims.jti in spent_rows) != (idx in m.spent):
            return False
        if (claims.jti in table.reservations) != m.holds(idx):
            return False
    return True

"""Interleaved duplicate registers, spawns, redeems, deregisters and operator ends at a real daemon,
against a sequential model.

Each example is a list of waves; the operations of a wave are fired at once, the waves one after
another. The daemon must behave like *some* sequential order of each wave (linearizable): every
wave's answers must be those of a sequential model run in one of the wave's orders, and the
daemon's state afterwards (which sessions run, which approvals are spent or still hold a slot)
must equal that model's.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from roost import tokens
from tests.conftest import RegistryBuilder, RunningDaemon

CRED = "x-murmur-spawn-credential"
APPROVAL = "x-murmur-spawn-approval"
TOPS, KIDS = 2, 3

Op = tuple[Any, ...]
ops = st.one_of(
    st.tuples(st.just("reg"), st.integers(0, TOPS - 1)),
    st.tuples(st.just("spawn"), st.integers(0, TOPS + KIDS - 1)),
    st.tuples(st.just("redeem"), st.integers(0, 5), st.integers(0, KIDS - 1)),
    st.tuples(st.just("dereg"), st.integers(0, TOPS + KIDS - 1)),
    st.tuples(st.just("cancel"), st.integers(0, TOPS + KIDS - 1)),
)
waves = st.lists(st.lists(ops, min_size=1, max_size=4), min_size=1, max_size=5)


@dataclass(frozen=True)
class Model:
    running: frozenset[str] = frozenset()
    ended: frozenset[str] = frozenset()
    parent_of: tuple[tuple[str, str], ...] = ()  # approval index → parent session
    spent: frozenset[int] = frozenset()

    def known(self, sid: str) -> bool:
        return sid in self.running or sid in self.ended

    def step(
        self, op: Op, names: list[str], creds: dict[str, str], approvals: list[str], new_approval: int
    ) -> tuple[int, Model]:
        kind = op[0]
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
                return 200, replace(self, running=self.running - {sid}, ended=self.ended | {sid})
            return (409 if sid in self.ended else 404), self
        if sid not in creds or sid not in self.running:
            return 403, self
        return 200, replace(self, running=self.running - {sid}, ended=self.ended | {sid})


async def _fire(
    d: RunningDaemon, op: Op, names: list[str], creds: dict[str, str], approvals: list[str]
) -> tuple[int, Any]:
    kind = op[0]
    if kind == "reg":
        body = {"session_id": names[op[1]], "name": "orchestrator", "version": "0.1.0"}
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
        async with (
            aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(d.roost.config.admin_socket_path))) as admin,
            admin.post(f"http://admin/sessions/{names[op[1]]}/end", json={"reason": "model"}) as resp,
        ):
            status, answer = resp.status, await resp.json()
        assert status in (200, 404, 409), (op, status, answer)
        return status, answer
    else:
        cred = creds.get(names[op[1]], "msc1.bogus")
        status, answer, _, _ = await d.call("POST", "/deregister", json={"outcome": "complete"}, headers={CRED: cred})
    assert status in (-1, 200, 403), (op, status, answer)
    return status, answer


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=waves)
@example(plan=[[("reg", 0)], [("spawn", 0), ("spawn", 0)], [("redeem", 0, 0), ("redeem", 0, 1)], [("spawn", 2)]])
@example(plan=[[("reg", 0), ("reg", 0)], [("spawn", 0), ("cancel", 0)], [("redeem", 0, 0), ("dereg", 0)]])
async def test_interleavings_match_a_sequential_model(
    plan: list[list[Op]], daemon_factory: Any, registry: RegistryBuilder
) -> None:
    d = await _daemon(daemon_factory, registry)
    tag = os.urandom(4).hex()
    names = [f"ses_{tag}t{i:07x}" for i in range(TOPS)] + [f"ses_{tag}k{i:07x}" for i in range(KIDS)]
    creds: dict[str, str] = {}
    approvals: list[str] = []
    candidates = {Model()}
    for wave in plan:
        answers = await asyncio.gather(*(_fire(d, op, names, creds, approvals) for op in wave))
        statuses = [s for s, _ in answers]
        fresh = [i for i, op in enumerate(wave) if op[0] == "spawn" and statuses[i] == 200]
        nxt: set[Model] = set()
        for model in candidates:
            for order in itertools.permutations(range(len(wave))):
                m, ok = model, True
                for i in order:
                    new_idx = len(approvals) + fresh.index(i) if i in fresh else -1
                    status, m = m.step(wave[i], names, creds, approvals, new_idx)
                    if status != statuses[i]:
                        ok = False
                        break
                if ok:
                    nxt.add(m)
        assert nxt, f"no sequential order explains {list(zip(wave, statuses, strict=True))}"
        candidates = nxt
        for i, op in enumerate(wave):
            if statuses[i] != 200:
                continue
            if op[0] == "reg":
                creds[names[op[1]]] = answers[i][1]["credential"]
            elif op[0] == "redeem":
                creds[names[TOPS + op[2]]] = answers[i][1]["credential"]
        approvals += [answers[i][1]["approval"] for i in fresh]
    assert any(_matches(d, m, names, approvals) for m in candidates), "the daemon's state matches no model"


_DAEMON: dict[int, RunningDaemon] = {}


async def _daemon(factory: Any, registry: RegistryBuilder) -> RunningDaemon:
    """One daemon per test run (the factory's), shared by the examples: each uses its own ids."""
    key = id(factory)
    if key not in _DAEMON:
        registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
        registry.add("worker")
        _DAEMON.clear()
        _DAEMON[key] = await factory(
            registry.root, spawn_allow=("orchestrator",), max_concurrent=1000, max_live_capsules=100_000
        )
    return _DAEMON[key]


def _matches(d: RunningDaemon, m: Model, names: list[str], approvals: list[str]) -> bool:
    table = d.roost.table
    for sid in names:
        rec = table.get(sid)
        if sid in m.running and (rec is None or not rec.running):
            return False
        if sid in m.ended and (rec is None or rec.running):
            return False
        if not m.known(sid) and rec is not None:
            return False
    parent_of = dict(m.parent_of)
    for idx, approval in enumerate(approvals):
        claims = tokens.verify_approval(d.roost.keys.approval_key, approval, now_ms=0)
        if (claims.jti in table.spent) != (idx in m.spent):
            return False
        holds = idx not in m.spent and parent_of[str(idx)] in m.running
        if (claims.jti in table.reservations) != holds:
            return False
    return True

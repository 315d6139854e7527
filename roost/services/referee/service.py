"""The referee: ``/spawn``, ``/register``, ``/deregister`` and ``/status`` semantics.

Check order, bounds and refusal sentences follow upstream's, byte for byte, so an upstream capsule
runtime can use this daemon unchanged. Every decision is made on the in-memory
:class:`~roost.state.sessions.SessionTable` without awaiting between the check and the reservation it
grants; the change is then made durable before the answer leaves.

This module sequences; the pieces it sequences live beside it: registering a session
(:mod:`.registration`, composed here), whether a start is admitted
(:mod:`roost.core.admission`, pure) and how each refusal reads (:mod:`roost.core.refusals`), the
registry answers it reuses (:mod:`.resolvecache`), lease expiries (:mod:`.leases`), the per-user
registration rate (:mod:`.quotas`), and the rows it writes (:mod:`roost.state.repos`).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple

import structlog

from roost.core import tokens
from roost.core.admission import SpawnLimits, admit_spawn
from roost.core.allownames import allows
from roost.core.api_models import DeregisterRequest, RegisterRequest
from roost.core.envelope import violation
from roost.core.errors import IdentityRefused, Refused
from roost.core.ids import require_id, token_id
from roost.core.refusals import for_spawn, refusals
from roost.observe import logs
from roost.services.periodic import every
from roost.services.referee.leases import Leases
from roost.services.referee.registration import RegisterCaller, Registrar, WorkdirCheck
from roost.services.referee.reservelog import ReservationJournal, replay
from roost.services.referee.resolvecache import ArtifactCache
from roost.state.config import Config
from roost.state.keys import KeyHolder, KeyRing
from roost.state.registry import Artifact, Registry
from roost.state.repos.sessions import SessionRepository
from roost.state.repos.spent import SpentRepository
from roost.state.sessions import Reservation, SessionRecord, SessionTable, Slot
from roost.state.settings import Settings
from roost.state.store import Store
from roost.system.blocking import BlockingExecutor
from roost.system.workdirs import registered_workdir

__all__ = ["APPROVAL_TTL_MS", "Grant", "Referee", "refusals"]

log = structlog.get_logger("roost.referee")

APPROVAL_TTL_MS = 60_000
EXPIRY_SWEEP_SECS = 1.0
LEASE_CHECK_TICKS = 5  # leases are checked every fifth expiry sweep
Clock = Callable[[], int]
SessionEndHook = Callable[[SessionRecord], Awaitable[None]]


def wall_ms() -> int:
    return max(0, time.time_ns() // 1_000_000)


class Grant(NamedTuple):
    """A granted spawn: the approval token and what it pins (a tuple: one is made per grant)."""

    approval: str
    claims: tokens.ApprovalClaims
    artifact: Artifact
    parent: SessionRecord

    def answer(self) -> dict[str, object]:
        return {
            "approval": self.approval,
            "name": self.artifact.name,
            "version": self.artifact.version,
            "sha256": self.artifact.sha256,
            "expires_at_ms": self.claims.exp,
        }


class Referee:
    def __init__(
        self,
        *,
        settings: Settings,
        table: SessionTable,
        store: Store,
        keys: KeyHolder,
        executor: BlockingExecutor,
        clock: Clock = wall_ms,
        workdirs: WorkdirCheck | None = None,
    ) -> None:
        self._settings = settings
        self.table = table
        self.store = store
        self._keys = keys
        self.executor = executor
        self.clock = clock
        self.sessions = SessionRepository(store)
        self.spent = SpentRepository(store)
        self.journal = ReservationJournal(store, clock)
        self.on_session_end: list[SessionEndHook] = []
        self.artifacts = ArtifactCache(lambda: self.registry, executor, lambda: self.config.registry_recheck_secs)
        self._verified: dict[str, tuple[KeyRing, tokens.CredentialClaims]] = {}
        self._violations: dict[tuple[str, str, str], str | None] = {}
        self.draining = False
        self._leases = Leases()
        self.registrar = Registrar(
            settings=settings,
            table=table,
            store=store,
            keys=keys,
            clock=clock,
            artifacts=self.artifacts,
            workdirs=workdirs or self._local_workdir,
            sessions=self.sessions,
            spent=self.spent,
            draining=lambda: self.draining,
            release_slot=self.release_slot,
            check_uid_sessions=self.check_uid_sessions,
        )

    @property
    def config(self) -> Config:
        """The configuration in force (a reload swaps it in :class:`roost.state.settings.Settings`)."""
        return self._settings.config

    @property
    def registry(self) -> Registry:
        return self._settings.registry

    @property
    def keys(self) -> KeyRing:
        """The key ring in force (a rotation swaps it in :class:`roost.state.keys.KeyHolder`)."""
        return self._keys.ring

    def start_draining(self) -> bool:
        """Refuse new spawns, top-level registrations and launches from now on; True if it already did."""
        already, self.draining = self.draining, True
        return already

    # -- identity --------------------------------------------------------------------------
    def authenticate(self, credential: str | None) -> SessionRecord:
        """The running session a credential names, or the one fixed identity refusal."""
        if not credential:
            raise IdentityRefused()
        keys = self.keys
        cached = self._verified.get(credential)
        if cached is not None and (cached[0] is keys or cached[0] in self._keys.rings()):
            claims = cached[1]
        else:
            claims, keys = self._verify_credential(credential)
            # Only a fully verified token is remembered, and only under the key ring that
            # verified it: a rotation makes every entry miss (after its grace, if it has one).
            if len(self._verified) >= 4096:
                self._verified.clear()
            self._verified[credential] = (keys, claims)
        rec = self.table.running_session(claims.sid)
        if rec is None or not secrets.compare_digest(rec.cred_nonce, claims.n):
            raise IdentityRefused()
        if claims.sid in self._leases.until:
            self._leases.grant(claims.sid, self.clock(), self.lease_ms)
        return rec

    def _verify_credential(self, credential: str) -> tuple[tokens.CredentialClaims, KeyRing]:
        """The claims and the ring that verified them: the one in force, or a replaced one in
        its grace (roost/state/keys.py); the identity refusal otherwise."""
        for ring in self._keys.rings():
            try:
                return tokens.verify_credential(ring.credential_key, credential), ring
            except tokens.TokenError:
                continue
        raise IdentityRefused()

    # -- artifacts (roost/services/referee/resolvecache.py) ------------------------------------------------
    async def resolve(self, name: str, version: str) -> Artifact:
        """Resolve ``name@version``, reusing an answer checked within ``registry_recheck_secs``."""
        return await self.artifacts.resolve(name, version)

    def forget_resolved(self) -> None:
        """Drop every cached resolution (SIGHUP, ``roostctl registry add``)."""
        self.artifacts.forget()

    # -- POST /spawn -----------------------------------------------------------------------
    async def spawn(
        self,
        credential: str | None,
        name: str,
        version: str,
        *,
        untrusted: bool = False,
        job_id: str | None = None,
    ) -> Grant:
        """Referee one spawn for the session the credential names; reserve its slot durably."""
        require_id("name", name)
        require_id("version", version)
        parent = self.authenticate(credential)
        if self.draining:
            raise Refused(refusals.DRAINING_SPAWN, "draining")
        registry = self.config.registry_name
        if not allows(parent.envelope.spawn_allow, name, registry):
            raise Refused(refusals.not_in_parent_allow(name), "spawn_allow")
        now = self.clock()
        self._check_bounds(parent, now)
        artifact = self.artifacts.fresh(name, version)
        if artifact is None:
            artifact = await self.resolve(name, version)
            # The registry was read in the executor: the parent may have ended, a drain begun,
            # and other grants may have taken the last slots meanwhile.
            if self.table.running_session(parent.session_id) is None:
                raise IdentityRefused()
            if self.draining:
                raise Refused(refusals.DRAINING_SPAWN, "draining")
            now = self.clock()
            self._check_bounds(parent, now)
        # From here to the reservation nothing awaits: the bounds just checked still hold.
        # A session's envelope is a function of its artifact, so the pair of digests keys it.
        pair = (parent.sha256, artifact.sha256, registry)
        if pair in self._violations:
            why = self._violations[pair]
        else:
            why = violation(parent.envelope, self.artifacts.envelope_of(artifact), registry)
            if len(self._violations) >= 4096:
                self._violations.clear()
            self._violations[pair] = why
        if why is not None:
            raise Refused(why, "envelope")
        approval, claims = tokens.mint_approval(
            self.keys.approval_key,
            sid=parent.session_id,
            name=artifact.name,
            version=artifact.version,
            digest=artifact.sha256,
            depth=parent.depth_remaining - 1,
            exp_ms=now + APPROVAL_TTL_MS,
        )
        # The slot, in Reservation's field order (a plain tuple: one is made per grant).
        slot: Slot = (
            claims.jti,
            parent.session_id,
            artifact.name,
            artifact.version,
            artifact.sha256,
            claims.depth,
            "untrusted" if untrusted else parent.trust,
            claims.exp,
            job_id,
        )
        self.table.reserve(slot)
        # Written behind (roost/services/referee/reservelog.py): a pending slot lost in a crash only
        # under-counts for at most 60 s, and trust lowered by the request is sealed where it
        # matters (the job record; a missing reservation registers its child untrusted).
        self.journal.granted(slot)
        # A grant is this endpoint's access log: debug, like access logs;
        # refusals are logged at info by the route, and the child's registration is too.
        if logs.enabled_for(logging.DEBUG):
            log.debug(
                "spawn_granted",
                session_id=parent.session_id,
                capsule=artifact.coordinates,
                approval_id=token_id(approval),
                depth=claims.depth,
            )
        return Grant(approval, claims, artifact, parent)

    async def expire_forever(self, every_secs: float = EXPIRY_SWEEP_SECS) -> None:
        """Drop expired slots every ``every_secs`` even when no request comes to do it, and end
        lapsed leases every :data:`LEASE_CHECK_TICKS` of those; a failed tick is logged and the
        next one runs (:func:`roost.services.periodic.every`).

        Each /spawn prunes what expired since the one before it; after a flood of grants and then
        quiet, the first request would otherwise pay for every slot that lapsed meanwhile (a
        minute of a flood is hundreds of thousands) in one stall.
        """
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            ticks += 1
            now = self.clock()
            self.table.prune(now)
            if ticks % LEASE_CHECK_TICKS == 0 and self._leases:
                await self.lapse_leases(now)

        await every(lambda: every_secs, tick, failed="expiry_sweep_failed", logger="roost.referee")

    def check_uid_sessions(self, uid: int | None) -> None:
        """The per-uid live-session quota (children count for their parent's uid)."""
        limit = self.config.uid_live_sessions_limit
        live = self.table.live_by_uid.get(uid, 0)
        if live >= limit:
            raise Refused(refusals.uid_sessions(uid, limit, live), "quota_sessions")

    def _check_bounds(self, parent: SessionRecord, now_ms: int) -> None:
        """Depth, machine ceiling, concurrency, the user's sessions — in upstream order
        (expired slots pruned first; roost/core/admission.py decides)."""
        cfg = self.config
        table = self.table
        if table.next_expiry_ms <= now_ms:
            table.prune(now_ms)
        refusal = admit_spawn(
            SpawnLimits(cfg.max_depth, cfg.max_live_capsules, cfg.max_concurrent, cfg.uid_live_sessions_limit),
            depth_remaining=parent.depth_remaining,
            live_capsules=table.live_capsules(),
            live_children=table.live_children(parent.session_id),
            uid=parent.uid,
            uid_live=table.live_by_uid.get(parent.uid, 0),
        )
        if refusal is not None:
            raise for_spawn(refusal)

    def release_slot(self, jti: str) -> Reservation | None:
        """Give back one pending slot (its child will never register)."""
        res = self.table.release(jti)
        if res is not None:
            self.journal.released([res])
        return res

    def release_slots_of(self, parent_id: str) -> list[Reservation]:
        """Give back every pending slot a session holds."""
        gone = self.table.release_all_of(parent_id)
        self.journal.released(gone)
        return gone

    async def _local_workdir(self, workdir: str, uid: int | None, job_id: str | None) -> str:
        return await self.executor.run(registered_workdir, workdir, uid)

    # -- POST /register (roost/services/referee/registration.py) ---------------------------------------------
    async def register(
        self, approval: str | None, req: RegisterRequest, caller: RegisterCaller
    ) -> tuple[str, SessionRecord]:
        """Register the session ``req`` names (:meth:`.registration.Registrar.register`)."""
        return await self.registrar.register(approval, req, caller)

    @property
    def on_session_registered(self) -> list[Callable[[SessionRecord], None]]:
        """Hooks run after each registration (the relay forgets a door's key, the session watch
        starts watching)."""
        return self.registrar.on_registered

    async def record_workdir_id(self, rec: SessionRecord, identity: tuple[int, int]) -> None:
        """Hold the workdir identity taken at register with the session and make it durable, so
        the peer plane compares it after a restart too (docs/security.md, "Workdirs")."""
        rec.workdir_id = identity
        await self.store.commit([self.sessions.workdir_id_op(rec)])

    # -- POST /deregister ------------------------------------------------------------------
    async def deregister(self, credential: str | None, req: DeregisterRequest) -> SessionRecord:
        rec = self.authenticate(credential)
        await self.end_session(rec, "complete" if req.outcome == "complete" else "failed")
        return rec

    async def end_session(self, rec: SessionRecord, status: str, reason: str | None = None) -> bool:
        """Mark a session ended, drop its pending approvals, and run the end hooks (lifelines,
        the observation event). ``reason`` is recorded with it. False if it had already ended."""
        if not rec.running:
            return False
        now = self.clock()
        rec.end_reason = reason
        self._leases.drop(rec.session_id)
        self.table.end(rec, "complete" if status == "complete" else "failed", now)
        self.release_slots_of(rec.session_id)
        await self.store.commit([self.sessions.status_op(rec)])
        log.info("session_ended", session_id=rec.session_id, capsule=rec.coordinates, status=rec.status, reason=reason)
        for hook in list(self.on_session_end):
            try:
                await hook(rec)
            except Exception:
                log.exception("session_end_hook_failed", session_id=rec.session_id)
        return True

    # -- leases ------------------------------------------------------------------------------
    # A session the daemon cannot watch (no verified pid, not launched by the launcher) holds a
    # lease: any authenticated call renews it (and roost-capsule calls POST /renew while it
    # runs); when it lapses the session ends with the reason recorded, as if it had failed.

    @property
    def leases(self) -> dict[str, int]:
        """Each leased session's expiry (wall-clock ms)."""
        return self._leases.until

    def lease(self, rec: SessionRecord, now_ms: int | None = None) -> None:
        """Give ``rec`` a lease (it has no process roost can watch)."""
        self._leases.grant(rec.session_id, self.clock() if now_ms is None else now_ms, self.lease_ms)

    def supervised(self, rec: SessionRecord) -> None:
        """``rec`` is now a job's session: the launcher watches its process (its exit ends the
        session), so a lease granted before the job linked it must not end it under the job."""
        self._leases.drop(rec.session_id)

    @property
    def lease_ms(self) -> int:
        return int(self.config.session_lease_secs * 1000)

    def renew(self, rec: SessionRecord) -> int | None:
        """Renew ``rec``'s lease, if it holds one; the new expiry (ms), or None."""
        return self._leases.renew(rec.session_id, self.clock(), self.lease_ms)

    async def lapse_leases(self, now_ms: int) -> int:
        """End every session whose lease has lapsed by ``now_ms``; return how many."""
        ended = 0
        secs = self.config.session_lease_secs
        for sid in self._leases.lapsed(now_ms):
            if not self._leases.still_lapsed(sid, now_ms):
                continue  # renewed while an earlier one was being ended
            self._leases.drop(sid)
            rec = self.table.running_session(sid)
            if rec is None or rec.job_id is not None:
                continue  # ended, or a job's session now (the launcher watches it)
            reason = f"lease lapsed: no authenticated call from this session for {secs:g} seconds"
            if await self.end_session(rec, "failed", reason):
                ended += 1
        return ended

    # -- GET /status -----------------------------------------------------------------------
    async def lookup(self, session_id: str) -> SessionRecord | None:
        """The session from memory, else (ended, retired from memory) from the database.

        A record read back from disk is only shown, never put into the working set."""
        rec = self.table.get(session_id)
        if rec is not None:
            return rec
        stored = await self.sessions.get(session_id)
        return stored if stored is not None else self.table.get(session_id)

    async def status_of(self, session_id: str) -> dict[str, object] | None:
        """``GET /status``: as :meth:`status`, and for a session only the database still holds."""
        answer = self.status(session_id)
        if answer is not None:
            return answer
        rec = await self.lookup(session_id)
        return None if rec is None else self._status(rec)

    def status(self, session_id: str) -> dict[str, object] | None:
        rec = self.table.get(session_id)
        if rec is None:
            return None
        return self._status(rec)

    def _status(self, rec: SessionRecord) -> dict[str, object]:
        session_id = rec.session_id
        self.table.prune(self.clock())
        return {
            "status": rec.status,
            "depth_remaining": rec.depth_remaining,
            "live_children": self.table.live_children(session_id),
            "live_capsules": self.table.live_capsules(),
        }

    # -- startup ---------------------------------------------------------------------------
    def load(self) -> None:
        """Fill the table from the store (blocking; called once at startup)."""
        now = self.clock()
        # Only what is live: running sessions, and the ended ones an unfinished job still
        # names (its child's own record of how it ended, or its parent). History stays on disk
        # until retention deletes it, so a restart costs the same after a year as after a day.
        for rec in self.sessions.live_sync():
            self.table.add(rec)
        for jti, exp_ms in self.spent.unexpired_sync(now):
            self.table.spend(jti, exp_ms, now)
        for res in replay(self.journal.rows.unexpired_sync(now), now):
            # Redeemed, or its parent ended: the release may not have reached the journal.
            if res.jti not in self.table.spent and self.table.running_session(res.parent_id) is not None:
                self.table.reserve(res)
        self.store.write_sync([self.journal.rows.compact_op(now), self.spent.expire_op(now)])

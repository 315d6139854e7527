"""``POST /register``: a session joins, top-level or as a child redeeming its spawn approval.

The referee (:mod:`roost.services.referee.service`) composes a :class:`Registrar` with what
registering needs and answers ``/register`` through it: the route hands over its typed request
whole (a :class:`~roost.core.api_models.RegisterRequest`) with what it learned about the caller
(a :class:`RegisterCaller`). Registering forks once: a top-level session or a child is admitted
by its own half, each returning an :class:`Admission`, which one record and one insert follow.

The check order is upstream's: ids, then (with a workdir) the
workdir on the host the session runs on; a top-level session is admitted like a top-level launch
(draining, ``--spawn-allow``; no ceiling: upstream bounds what a session spawns, not what
registers) and counted against its user's quotas; a child's approval is verified, spent at once
(whatever follows) and must name the coordinates and digest that resolve now. The registry is
read in the executor, so what was checked before that await is checked again after it, with no
await between the last check and the table insert; the insert is made durable before the
credential leaves.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import NamedTuple

import structlog

from roost.core import tokens
from roost.core.admission import admit_top_level
from roost.core.api_models import RegisterRequest
from roost.core.envelope import Envelope
from roost.core.errors import IdentityRefused, Refused
from roost.core.ids import require_id, token_id
from roost.core.refusals import for_register, refusals
from roost.services.referee.quotas import RegistrationRate
from roost.services.referee.resolvecache import ArtifactCache
from roost.state.keys import KeyHolder
from roost.state.registry import Artifact
from roost.state.repos.sessions import SessionRepository
from roost.state.repos.spent import SpentRepository
from roost.state.sessions import SLOT_JOB, Reservation, SessionRecord, SessionTable, Trust
from roost.state.settings import Settings
from roost.state.store import Op, Store, StoreConflict

__all__ = ["Admission", "RegisterCaller", "Registrar", "WorkdirCheck"]

log = structlog.get_logger("roost.referee")

WorkdirCheck = Callable[[str, int | None, str | None], Awaitable[str]]
"""``(workdir, uid, job_id)`` → the normalised workdir if ``uid`` may use it where the session
runs (the job's node, else this host), or the refusal (roost/backends/workdirplace.py)."""


class RegisterCaller(NamedTuple):
    """What the ``/register`` route learned about the caller, beside its body.

    ``uid`` is the calling uid (a child takes its parent's instead; a launcher's ticket gives its
    job's), ``pid_start`` the start of the process the route believed the body's ``pid`` to be
    (the route drops a pid it could not believe), ``job_id`` the job a registration ticket named.
    """

    uid: int | None = None
    pid_start: float | None = None
    job_id: str | None = None


class Admission(NamedTuple):
    """What admitting a registration decided, top-level or child: what the session runs, where
    it stands, and what undoing it takes.

    ``spent`` is a child's approval spend, made durable with the session (and alone if the
    insert fails); ``rate_stamp`` is when a top-level registration was counted against its
    user's minute (given back if the insert fails).
    """

    artifact: Artifact
    parent_id: str | None
    depth: int
    trust: Trust
    uid: int | None
    job_id: str | None
    spent: Op | None
    rate_stamp: int | None


class Registrar:
    """Registers sessions into the table and the store; ``on_registered`` hooks run after each."""

    def __init__(
        self,
        *,
        settings: Settings,
        table: SessionTable,
        store: Store,
        keys: KeyHolder,
        clock: Callable[[], int],
        artifacts: ArtifactCache,
        workdirs: WorkdirCheck,
        sessions: SessionRepository,
        spent: SpentRepository,
        draining: Callable[[], bool],
        release_slot: Callable[[str], Reservation | None],
        check_uid_sessions: Callable[[int | None], None],
    ) -> None:
        self._settings = settings
        self._table = table
        self._store = store
        self._keys = keys
        self._clock = clock
        self._artifacts = artifacts
        self._workdirs = workdirs
        self._sessions = sessions
        self._spent = spent
        self._draining = draining
        self._release_slot = release_slot
        self._check_uid_sessions = check_uid_sessions
        self._rate = RegistrationRate()
        self.on_registered: list[Callable[[SessionRecord], None]] = []

    def _check_uid_rate(self, uid: int | None, now_ms: int) -> None:
        """The per-uid registrations-per-minute quota; records this registration if allowed."""
        limit = self._settings.config.uid_registrations_per_minute
        if not self._rate.admit(uid, now_ms, limit):
            raise Refused(refusals.uid_rate(uid, limit), "quota_rate")

    def _verified(self, approval: str, now_ms: int) -> tokens.ApprovalClaims:
        """The approval's claims (its MAC and expiry checked; whether it was spent is not)."""
        for ring in self._keys.rings():  # a replaced ring verifies during its grace (roost/state/keys.py)
            try:
                return tokens.verify_approval(ring.approval_key, approval, now_ms=now_ms)
            except tokens.ApprovalExpired:
                raise Refused(refusals.EXPIRED, "approval_expired") from None
            except tokens.TokenError:
                continue
        raise IdentityRefused()

    def _approver(self, approval: str) -> tuple[int | None, str | None]:
        """The uid of the running session an approval was granted to (verified, not spent), and
        the job its slot was reserved for (None: a ``/spawn`` of the session's own)."""
        claims = self._verified(approval, self._clock())
        parent = self._table.running_session(claims.sid)
        if parent is None:
            raise IdentityRefused()
        slot = self._table.reservations.get(claims.jti)
        job_id = slot[SLOT_JOB] if slot is not None else None
        return parent.uid, job_id if isinstance(job_id, str) else None

    def _check_top_level(self, name: str) -> None:
        """A top-level registration's admission (no ceiling: upstream bounds spawns, not these)."""
        cfg = self._settings.config
        refusal = admit_top_level(
            name, draining=self._draining(), spawn_allow=cfg.spawn_allow, registry=cfg.registry_name
        )
        if refusal is not None:
            raise for_register(refusal)

    def _check_new(self, session_id: str) -> None:
        """A session id registers once: a live duplicate gets the identity refusal."""
        if self._table.get(session_id) is not None:
            raise IdentityRefused()

    async def register(
        self, approval: str | None, req: RegisterRequest, caller: RegisterCaller
    ) -> tuple[str, SessionRecord]:
        """Register the session ``req`` names: top-level without an approval, else as the child
        the approval was granted for. Returns its credential and its record."""
        require_id("session_id", req.session_id)
        require_id("name", req.name)
        require_id("version", req.version)
        self._check_new(req.session_id)
        workdir = req.workdir
        if workdir is not None:
            # The workdir must belong to the session's uid (a child's: its parent's), on the disk
            # of the host the session runs on. Checked first, so everything below still runs
            # with no await before the table insert.
            owner, job = (caller.uid, caller.job_id) if approval is None else self._approver(approval)
            workdir = await self._workdirs(workdir, owner, job or caller.job_id)
        if approval is None:
            admitted = await self._admit_top_level(req, caller)
        else:
            admitted = await self._admit_child(approval, req, caller)
        # No await since the last check of either half: the insert below sees what they saw.
        credential, claims = tokens.mint_credential(self._keys.ring.credential_key, req.session_id)
        rec = self._record(req, caller, admitted, workdir, claims.n)
        await self._insert(rec, admitted)
        for hook in list(self.on_registered):
            try:
                hook(rec)
            except Exception:
                log.exception("session_registered_hook_failed", session_id=rec.session_id)
        log.info(
            "session_registered",
            session_id=rec.session_id,
            capsule=rec.coordinates,
            parent=rec.parent_id,
            depth_remaining=rec.depth_remaining,
            trust=rec.trust,
            uid=rec.uid,
            credential_id=token_id(credential),
        )
        return credential, rec

    async def _admit_top_level(self, req: RegisterRequest, caller: RegisterCaller) -> Admission:
        """A top-level session: admitted like a top-level launch, counted against its user's quotas."""
        self._check_top_level(req.name)
        artifact = await self._artifacts.resolve(req.name, req.version)
        # The registry was read in the executor: the same id may have registered meanwhile,
        # or a drain begun. Checked again with no await between here and the table insert.
        self._check_new(req.session_id)
        self._check_top_level(req.name)
        # Per-uid quotas: children are bounded where they are granted (POST /spawn); a
        # top-level registration is where one user's flood would start.
        self._check_uid_sessions(caller.uid)
        rate_stamp = self._clock()
        self._check_uid_rate(caller.uid, rate_stamp)
        depth = self._settings.config.max_depth
        return Admission(artifact, None, depth, "trusted", caller.uid, caller.job_id, None, rate_stamp)

    async def _admit_child(self, approval: str, req: RegisterRequest, caller: RegisterCaller) -> Admission:
        """A child redeeming its approval: spent at once (whatever follows), then it must name the
        coordinates and digest that resolve now; its trust is its reservation's."""
        artifact = await self._artifacts.resolve(req.name, req.version)
        # As before the await: a duplicate id is refused before the approval is looked at,
        # so it stays unspent, however the requests interleave.
        self._check_new(req.session_id)
        now = self._clock()
        claims = self._verified(approval, now)
        if not self._table.spend(claims.jti, claims.exp, now):
            raise Refused(refusals.REPLAYED, "approval_replayed")
        spent_op = self._spent.spend_op(claims.jti, claims.exp)
        try:
            parent = self._table.running_session(claims.sid)
            if parent is None:
                raise IdentityRefused()
            granted = f"{claims.name}@{claims.version}"
            asked = f"{req.name}@{req.version}"
            if granted != asked:
                raise Refused(refusals.coordinates(granted, asked), "approval_coordinates")
            if claims.digest != artifact.sha256:
                raise Refused(refusals.digest(asked, claims.digest, artifact.sha256), "approval_digest")
        except Refused:
            # The approval is spent the moment it verified, whatever follows.
            await self._store.commit([spent_op])
            raise
        res = self._release_slot(claims.jti)
        # No reservation behind a valid approval (lost in a crash): never assume more trust than
        # the least the request could have asked for.
        trust: Trust = res.trust if res is not None else "untrusted"
        job_id = caller.job_id or (res.job_id if res is not None else None)
        return Admission(artifact, parent.session_id, claims.depth, trust, parent.uid, job_id, spent_op, None)

    def _record(
        self, req: RegisterRequest, caller: RegisterCaller, admitted: Admission, workdir: str | None, nonce: str
    ) -> SessionRecord:
        artifact = admitted.artifact
        return SessionRecord(
            session_id=req.session_id,
            name=artifact.name,
            version=artifact.version,
            sha256=artifact.sha256,
            status="running",
            parent_id=admitted.parent_id,
            depth_remaining=admitted.depth,
            envelope=Envelope.from_manifest(artifact.manifest),
            manifest=artifact.manifest,
            trust=admitted.trust,
            cred_nonce=nonce,
            handle_salt=secrets.token_hex(16),
            created_ms=self._clock(),
            workdir=workdir,
            pid=req.pid,
            pid_start=caller.pid_start,
            capsule_url=req.capsule_url,
            job_id=admitted.job_id,
            uid=admitted.uid,
            containment=req.containment,
            formation_id=req.formation_id,
        )

    async def _insert(self, rec: SessionRecord, admitted: Admission) -> None:
        """Hold ``rec`` in the table and make it durable with the approval's spend; on failure
        nothing of it stays (the quota it used is given back, a spent approval stays spent)."""
        # Held in the table from here on, so a concurrent register of the same id is refused
        # by the checks above while this one's commit is in flight.
        self._table.add(rec)
        spent = admitted.spent
        ops = [spent, self._sessions.insert_op(rec)] if spent is not None else [self._sessions.insert_op(rec)]
        try:
            await self._store.commit(ops)
        except StoreConflict:
            # The id is in the database but not in memory: a session ended and retired from
            # the working set. The same refusal as for a live duplicate, which uses up no quota.
            self._undo(rec, admitted)
            if spent is not None:
                await self._store.commit([spent])
            raise IdentityRefused() from None
        except BaseException:
            self._undo(rec, admitted)
            raise

    def _undo(self, rec: SessionRecord, admitted: Admission) -> None:
        self._table.discard(rec)
        if admitted.rate_stamp is not None:
            self._rate.give_back(admitted.uid, admitted.rate_stamp)

"""``POST /register``: a session joins, top-level or as a child redeeming its spawn approval.

The referee (:mod:`roost.services.referee.service`) composes a :class:`Registrar` with what registering needs and
answers ``/register`` through it. The check order is upstream's: ids, then (with a workdir) the
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

import structlog

from roost.core import tokens
from roost.core.admission import admit_top_level
from roost.core.envelope import Envelope
from roost.core.errors import IdentityRefused, Refused
from roost.core.ids import require_id, token_id
from roost.core.refusals import for_register, refusals
from roost.services.referee.quotas import RegistrationRate
from roost.services.referee.resolvecache import ArtifactCache
from roost.state.keys import KeyHolder
from roost.state.repos.sessions import SessionRepository
from roost.state.repos.spent import SpentRepository
from roost.state.sessions import SLOT_JOB, Reservation, SessionRecord, SessionTable, Trust
from roost.state.settings import Settings
from roost.state.store import Op, Store, StoreConflict

__all__ = ["Registrar", "WorkdirCheck"]

log = structlog.get_logger("roost.referee")

WorkdirCheck = Callable[[str, int | None, str | None], Awaitable[str]]
"""``(workdir, uid, job_id)`` → the normalised workdir if ``uid`` may use it where the session
runs (the job's node, else this host), or the refusal (roost/backends/workdirplace.py)."""


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

    def _approver(self, approval: str) -> tuple[int | None, str | None]:
        """The uid of the running session an approval was granted to (verified, not spent), and
        the job its slot was reserved for (None: a ``/spawn`` of the session's own)."""
        try:
            claims = tokens.verify_approval(self._keys.ring.approval_key, approval, now_ms=self._clock())
        except tokens.ApprovalExpired:
            raise Refused(refusals.EXPIRED, "approval_expired") from None
        except tokens.TokenError:
            raise IdentityRefused() from None
        parent = self._table.running_session(claims.sid)
        if parent is None:
            raise IdentityRefused()
        slot = self._table.reservations.get(claims.jti)
        job_id = slot[SLOT_JOB] if slot is not None else None
        return parent.uid, job_id if isinstance(job_id, str) else None

    def _admit_top_level(self, name: str) -> None:
        """A top-level registration's admission (no ceiling: upstream bounds spawns, not these)."""
        refusal = admit_top_level(name, draining=self._draining(), spawn_allow=self._settings.config.spawn_allow)
        if refusal is not None:
            raise for_register(refusal)

    async def register(
        self,
        approval: str | None,
        *,
        session_id: str,
        name: str,
        version: str,
        workdir: str | None = None,
        pid: int | None = None,
        pid_start: float | None = None,
        capsule_url: str | None = None,
        job_id: str | None = None,
        uid: int | None = None,
        containment: str | None = None,
    ) -> tuple[str, SessionRecord]:
        """Register a session; ``uid`` is the caller's (a child takes its parent's instead)."""
        require_id("session_id", session_id)
        require_id("name", name)
        require_id("version", version)
        if self._table.get(session_id) is not None:
            raise IdentityRefused()
        if workdir is not None:
            # The workdir must belong to the session's uid (a child's: its parent's), on the disk
            # of the host the session runs on. Checked first, so everything below still runs
            # with no await before the table insert.
            owner, job = (uid, job_id) if approval is None else self._approver(approval)
            workdir = await self._workdirs(workdir, owner, job or job_id)
        ops: list[Op] = []
        spent_op: Op | None
        parent_id: str | None
        trust: Trust
        rate_stamp: int | None = None  # when this registration was counted against the minute
        if approval is None:
            self._admit_top_level(name)
            artifact = await self._artifacts.resolve(name, version)
            # The registry was read in the executor: the same id may have registered meanwhile,
            # or a drain begun. Checked again with no await between here and the table insert.
            if self._table.get(session_id) is not None:
                raise IdentityRefused()
            self._admit_top_level(name)
            # Per-uid quotas: children are bounded where they are granted (POST /spawn); a
            # top-level registration is where one user's flood would start.
            self._check_uid_sessions(uid)
            rate_stamp = self._clock()
            self._check_uid_rate(uid, rate_stamp)
            depth = self._settings.config.max_depth
            parent_id = None
            trust = "trusted"
            spent_op = None
        else:
            artifact = await self._artifacts.resolve(name, version)
            # As before the await: a duplicate id is refused before the approval is looked at,
            # so it stays unspent, however the requests interleave.
            if self._table.get(session_id) is not None:
                raise IdentityRefused()
            now = self._clock()
            try:
                claims = tokens.verify_approval(self._keys.ring.approval_key, approval, now_ms=now)
            except tokens.ApprovalExpired:
                raise Refused(refusals.EXPIRED, "approval_expired") from None
            except tokens.TokenError:
                raise IdentityRefused() from None
            if not self._table.spend(claims.jti, claims.exp, now):
                raise Refused(refusals.REPLAYED, "approval_replayed")
            spent_op = self._spent.spend_op(claims.jti, claims.exp)
            try:
                parent = self._table.running_session(claims.sid)
                if parent is None:
                    raise IdentityRefused()
                granted = f"{claims.name}@{claims.version}"
                asked = f"{name}@{version}"
                if granted != asked:
                    raise Refused(refusals.coordinates(granted, asked), "approval_coordinates")
                if claims.digest != artifact.sha256:
                    raise Refused(refusals.digest(asked, claims.digest, artifact.sha256), "approval_digest")
            except Refused:
                # The approval is spent the moment it verified, whatever follows.
                await self._store.commit([spent_op])
                raise
            ops.append(spent_op)
            res = self._release_slot(claims.jti)
            if res is not None:
                trust = res.trust
                job_id = job_id or res.job_id
            else:
                # No reservation behind a valid approval (lost in a crash): never assume
                # more trust than the least the request could have asked for.
                trust = "untrusted"
            depth = claims.depth
            parent_id = parent.session_id
            uid = parent.uid
        credential, cred_claims = tokens.mint_credential(self._keys.ring.credential_key, session_id)
        rec = SessionRecord(
            session_id=session_id,
            name=artifact.name,
            version=artifact.version,
            sha256=artifact.sha256,
            status="running",
            parent_id=parent_id,
            depth_remaining=depth,
            envelope=Envelope.from_manifest(artifact.manifest),
            manifest=artifact.manifest,
            trust=trust,
            cred_nonce=cred_claims.n,
            handle_salt=secrets.token_hex(16),
            created_ms=self._clock(),
            workdir=workdir,
            pid=pid,
            pid_start=pid_start,
            capsule_url=capsule_url,
            job_id=job_id,
            uid=uid,
            containment=containment,
        )
        # Held in the table from here on, so a concurrent register of the same id is refused
        # by the checks above while this one's commit is in flight.
        self._table.add(rec)
        ops.append(self._sessions.insert_op(rec))
        try:
            await self._store.commit(ops)
        except StoreConflict:
            # The id is in the database but not in memory: a session ended and retired from
            # the working set. The same refusal as for a live duplicate, which uses up no quota.
            self._table.discard(rec)
            if rate_stamp is not None:
                self._rate.give_back(uid, rate_stamp)
            if spent_op is not None:
                await self._store.commit([spent_op])
            raise IdentityRefused() from None
        except BaseException:
            self._table.discard(rec)
            if rate_stamp is not None:
                self._rate.give_back(uid, rate_stamp)
            raise
        for hook in list(self.on_registered):
            try:
                hook(rec)
            except Exception:
                log.exception("session_registered_hook_failed", session_id=session_id)
        log.info(
            "session_registered",
            session_id=session_id,
            capsule=rec.coordinates,
            parent=parent_id,
            depth_remaining=depth,
            trust=trust,
            uid=uid,
            credential_id=token_id(credential),
        )
        return credential, rec

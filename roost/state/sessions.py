"""The referee's working set: sessions, pending approvals (reservations) and spent approval ids.

This is the in-memory mirror of the SQLite tables. Every check the referee makes reads it
without awaiting, so a check and the reservation it leads to happen under one lock (the event
loop's single thread). Counting expired reservations is done at read time, as upstream does:
no timer releases a slot, the clock does.
"""

from __future__ import annotations

import heapq
import json
import math
import sqlite3
import sys
from collections import deque
from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from typing import Final, Literal, NamedTuple, cast

from roost.core.envelope import Envelope
from roost.core.manifest import Manifest
from roost.core.wire import SessionStatus

__all__ = [
    "SLOT_EXP",
    "SLOT_JOB",
    "SLOT_JTI",
    "SLOT_PARENT",
    "Reservation",
    "SessionRecord",
    "SessionStatus",
    "SessionTable",
    "Slot",
    "Trust",
    "identity_columns",
    "identity_from_columns",
]

Trust = Literal["trusted", "untrusted"]


@dataclass(slots=True)
class SessionRecord:
    session_id: str
    name: str
    version: str
    sha256: str
    status: SessionStatus
    parent_id: str | None
    depth_remaining: int
    envelope: Envelope
    manifest: Manifest
    trust: Trust
    cred_nonce: str
    handle_salt: str
    created_ms: int
    workdir: str | None = None
    pid: int | None = None
    pid_start: float | None = None
    capsule_url: str | None = None
    job_id: str | None = None
    ended_ms: int | None = None
    end_reason: str | None = None
    """Why the session ended, when it was not its own deregistration (a lease lapse, an operator)."""
    uid: int | None = None
    """The uid that registered the session (children inherit their parent's); None if unknown."""
    containment: str | None = None
    """The class the session's host achieved (advisory|scoped|sealed), as told at register."""
    workdir_id: tuple[int, int] | None = None
    """(dev, inode) of the workdir as checked at register, on this host (stored with the session,
    so one reloaded after a restart is compared too; None: not taken, or a node's workdir)."""
    formation_id: str | None = None
    """The formation the session belongs to (``MURMUR_FORMATION_ID``; roost/core/formation.py)."""

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def coordinates(self) -> str:
        return f"{self.name}@{self.version}"

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> SessionRecord:
        return cls(
            session_id=row["session_id"],
            name=row["name"],
            version=row["version"],
            sha256=row["sha256"],
            status=row["status"],
            parent_id=row["parent_id"],
            depth_remaining=int(row["depth_remaining"]),
            envelope=Envelope.from_json(row["envelope"]),
            manifest=Manifest.model_validate(json.loads(row["manifest"])),
            trust=row["trust"],
            cred_nonce=row["cred_nonce"],
            handle_salt=row["handle_salt"],
            workdir=row["workdir"],
            pid=row["pid"],
            pid_start=row["pid_start"],
            capsule_url=row["capsule_url"],
            job_id=row["job_id"],
            created_ms=int(row["created_ms"]),
            ended_ms=row["ended_ms"],
            end_reason=row["end_reason"],
            uid=row["uid"],
            containment=row["containment"],
            formation_id=row["formation_id"],
            workdir_id=identity_from_columns(row["workdir_dev"], row["workdir_ino"]),
        )


_U64: Final = 1 << 64


def _signed(value: int) -> int:
    """An unsigned 64-bit ``st_dev``/``st_ino`` as SQLite's signed INTEGER holds it."""
    return value - _U64 if value >= 1 << 63 else value


def identity_columns(identity: tuple[int, int] | None) -> tuple[int | None, int | None]:
    """``workdir_id`` as the ``(workdir_dev, workdir_ino)`` columns store it."""
    if identity is None:
        return None, None
    return _signed(identity[0]), _signed(identity[1])


def identity_from_columns(dev: int | None, ino: int | None) -> tuple[int, int] | None:
    """The ``workdir_id`` the two stored columns hold (None unless both were written)."""
    if dev is None or ino is None:
        return None
    return dev % _U64, ino % _U64


class Reservation(NamedTuple):
    """A slot held by a granted, not yet redeemed approval (a tuple: cheap to make, one per grant)."""

    jti: str
    parent_id: str
    name: str
    version: str
    sha256: str
    depth: int
    trust: Trust
    exp_ms: int
    job_id: str | None = None


# A Reservation's fields as a plain tuple, in the same order: what the referee builds per grant
# (a NamedTuple costs a Python-level call to make) and what the table and the journal keep.
Slot = tuple[str, str, str, str, str, int, Trust, int, str | None]

# Indices into a Slot (literal, so the type checker knows each field's type).
SLOT_JTI: Final = 0
SLOT_PARENT: Final = 1
SLOT_EXP: Final = 7
SLOT_JOB: Final = 8
assert Reservation._fields[SLOT_JTI] == "jti" and Reservation._fields[SLOT_PARENT] == "parent_id"
assert Reservation._fields[SLOT_EXP] == "exp_ms" and Reservation._fields[SLOT_JOB] == "job_id"


@dataclass
class SessionTable:
    """Sessions by id, live children per parent, reservations in grant order, spent ids."""

    sessions: dict[str, SessionRecord] = field(default_factory=dict)
    live_children_of: dict[str, set[str]] = field(default_factory=dict)
    # Slots are kept as plain tuples: the collector untracks an exact tuple of strings and
    # ints, but never a NamedTuple, and a busy host's table would otherwise be walked whole by
    # every full collection. ``Reservation`` is rebuilt for the (rare) callers that read one.
    reservations: dict[str, Slot] = field(default_factory=dict)
    reservations_of: dict[str, set[str]] = field(default_factory=dict)
    spent: dict[str, int] = field(default_factory=dict)
    running: int = 0
    live_by_uid: dict[int | None, int] = field(default_factory=dict)
    _expiry: deque[tuple[int, str]] = field(default_factory=deque)
    _late: list[tuple[int, str]] = field(default_factory=list)
    _ended: deque[tuple[int, str]] = field(default_factory=deque)
    # Ended sessions past the memory window kept because an unfinished job still names them.
    _held: dict[str, int] = field(default_factory=dict)
    _spent_by_second: dict[int, list[str]] = field(default_factory=dict)
    _spent_seconds: list[int] = field(default_factory=list)
    _forget_at_ms: int = sys.maxsize  # when the earliest bucket lapses (its second * 1000)
    _last_second: int = -1  # the bucket the last new id went to, and that bucket
    _last_bucket: list[str] = field(default_factory=list)

    # -- sessions --------------------------------------------------------------------------
    def get(self, session_id: str) -> SessionRecord | None:
        return self.sessions.get(session_id)

    def running_session(self, session_id: str) -> SessionRecord | None:
        rec = self.sessions.get(session_id)
        return rec if rec is not None and rec.running else None

    def add(self, rec: SessionRecord) -> None:
        self.sessions[rec.session_id] = rec
        if rec.running:
            self.running += 1
            self.live_by_uid[rec.uid] = self.live_by_uid.get(rec.uid, 0) + 1
            if rec.parent_id is not None:
                self.live_children_of.setdefault(rec.parent_id, set()).add(rec.session_id)
        else:
            self._ended.append((rec.ended_ms or 0, rec.session_id))

    def end(self, rec: SessionRecord, status: SessionStatus, now_ms: int) -> None:
        if not rec.running:
            return
        rec.status = status
        rec.ended_ms = now_ms
        self.running -= 1
        left = self.live_by_uid.get(rec.uid, 0) - 1
        if left > 0:
            self.live_by_uid[rec.uid] = left
        else:
            self.live_by_uid.pop(rec.uid, None)
        self._ended.append((now_ms, rec.session_id))
        if rec.parent_id is not None:
            kids = self.live_children_of.get(rec.parent_id)
            if kids is not None:
                kids.discard(rec.session_id)
                if not kids:
                    del self.live_children_of[rec.parent_id]

    def forget_ended(self, cutoff_ms: int, keep: Container[str] = frozenset()) -> int:
        """Drop sessions that ended at or before ``cutoff_ms`` from memory; return how many.

        A session in ``keep`` (an unfinished job names it: the job's own child, whose end says
        how the job ended, or its parent, whose door and workdir receive the completion) stays,
        and is looked at again at each later call until nothing names it. Walks only what ended
        by then and what is held (sessions end in clock order; one that ended under a clock
        stepped back waits behind the ones before it)."""
        dropped = 0
        ended, sessions, held = self._ended, self.sessions, self._held
        for sid in [sid for sid in held if sid not in keep]:
            del held[sid]
            rec = sessions.get(sid)
            if rec is not None and not rec.running:
                del sessions[sid]
                dropped += 1
        while ended and ended[0][0] <= cutoff_ms:
            ended_ms, sid = ended.popleft()
            rec = sessions.get(sid)
            if rec is None or rec.running:
                continue
            if sid in keep:
                held[sid] = ended_ms
                continue
            del sessions[sid]
            dropped += 1
        return dropped

    def discard(self, rec: SessionRecord) -> None:
        """Forget ``rec`` entirely (its registration never became durable), if it is still the
        record held under its id."""
        if self.sessions.get(rec.session_id) is not rec:
            return
        self.end(rec, "failed", rec.created_ms)
        del self.sessions[rec.session_id]

    def iter_running(self) -> Iterator[SessionRecord]:
        return (r for r in self.sessions.values() if r.running)

    # -- reservations ----------------------------------------------------------------------
    # Expiry order: every approval lives APPROVAL_TTL_MS from its grant, so slots expire in the
    # order they were granted while the wall clock runs forward. ``_expiry`` is that order (a
    # deque: appending and expiring touch only its ends, where a heap of hundreds of thousands
    # sifts through memory on every pop); a slot whose expiry falls before the last one queued
    # (the clock stepped back) goes to the ``_late`` heap instead, so both stay sorted; that heap
    # stays empty while the clock behaves.

    def prune(self, now_ms: int) -> int:
        """Drop every reservation whose approval has expired by ``now_ms``; return how many."""
        dropped = 0
        queue, late = self._expiry, self._late
        while queue and queue[0][0] <= now_ms:
            dropped += self._expire(queue.popleft()[1], now_ms)
        while late and late[0][0] <= now_ms:
            dropped += self._expire(heapq.heappop(late)[1], now_ms)
        return dropped

    def _expire(self, jti: str, now_ms: int) -> int:
        slot = self.reservations.get(jti)
        if slot is None or slot[SLOT_EXP] > now_ms:
            return 0  # released already, or held again under a later expiry
        del self.reservations[jti]
        self._unlink(slot[SLOT_PARENT], jti)
        return 1

    @property
    def next_expiry_ms(self) -> float:
        """No later than the earliest held slot's expiry (``inf`` if nothing is queued): until
        then :meth:`prune` has nothing to drop. A released slot may keep it earlier."""
        queue, late = self._expiry, self._late
        first = queue[0][0] if queue else math.inf
        return min(first, late[0][0]) if late else first

    def reserve(self, slot: Slot) -> None:
        """Hold ``slot`` (a :class:`Reservation` or the same fields as a plain tuple)."""
        slot = cast(Slot, tuple(slot))  # a Reservation becomes an exact tuple; an exact tuple is itself
        jti, exp = slot[SLOT_JTI], slot[SLOT_EXP]
        self.reservations[jti] = slot
        queue = self._expiry
        if not queue or exp >= queue[-1][0]:
            queue.append((exp, jti))
        else:
            heapq.heappush(self._late, (exp, jti))
        if len(queue) + len(self._late) > 2 * len(self.reservations) + 1024:
            # Released slots linger in the queues until their expiry; drop them now and then.
            self._expiry = deque(sorted((held[SLOT_EXP], held_jti) for held_jti, held in self.reservations.items()))
            self._late = []
        self.reservations_of.setdefault(slot[SLOT_PARENT], set()).add(jti)

    def release(self, jti: str) -> Reservation | None:
        slot = self.reservations.pop(jti, None)
        if slot is None:
            return None
        self._unlink(slot[SLOT_PARENT], jti)
        return Reservation._make(slot)

    def release_all_of(self, parent_id: str) -> list[Reservation]:
        out = []
        for jti in list(self.reservations_of.get(parent_id, ())):
            res = self.release(jti)
            if res is not None:
                out.append(res)
        return out

    def _unlink(self, parent_id: str, jti: str) -> None:
        mine = self.reservations_of.get(parent_id)
        if mine is not None:
            mine.discard(jti)
            if not mine:
                del self.reservations_of[parent_id]

    # -- counts (callers prune first) ------------------------------------------------------
    def live_capsules(self) -> int:
        return self.running + len(self.reservations)

    def live_children(self, parent_id: str) -> int:
        return len(self.live_children_of.get(parent_id, ())) + len(self.reservations_of.get(parent_id, ()))

    # -- spent approvals -------------------------------------------------------------------
    # A spent id is kept exactly while its approval could still be presented (``exp_ms >
    # now``). Ids are filed by the second after their expiry, so forgetting them walks only
    # the seconds that lapsed: a check is one dict lookup however many ids are held.

    def spend(self, jti: str, exp_ms: int, now_ms: int) -> bool:
        """Record ``jti`` as redeemed; False if it already was (a replay)."""
        if self._forget_at_ms <= now_ms:
            self.forget_spent(now_ms)
        spent = self.spent
        if jti in spent:
            return False
        spent[jti] = exp_ms
        second = exp_ms // 1000 + 1  # every id in it has expired once now reaches second * 1000
        if second == self._last_second:  # redemptions come in bursts: most share the last bucket
            self._last_bucket.append(jti)
            return True
        bucket = self._spent_by_second.get(second)
        if bucket is None:
            bucket = self._spent_by_second[second] = []
            heapq.heappush(self._spent_seconds, second)
            self._forget_at_ms = self._spent_seconds[0] * 1000
        bucket.append(jti)
        self._last_second, self._last_bucket = second, bucket
        return True

    def forget_spent(self, now_ms: int) -> int:
        """Drop every spent id whose approval has expired by ``now_ms``; return how many."""
        dropped = 0
        heap, buckets, spent = self._spent_seconds, self._spent_by_second, self.spent
        while heap and heap[0] * 1000 <= now_ms:
            second = heapq.heappop(heap)
            if second == self._last_second:
                self._last_second, self._last_bucket = -1, []
            for jti in buckets.pop(second):
                if jti in spent:
                    del spent[jti]
                    dropped += 1
        self._forget_at_ms = heap[0] * 1000 if heap else sys.maxsize
        return dropped

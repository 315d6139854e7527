"""Reservations on disk as an append-only journal: one row per write-behind batch.

A granted approval holds a slot until its child registers, its parent ends, or it expires
(60 s). Writing every slot as its own SQLite row, and deleting it again, cost about as much CPU
as the rest of ``POST /spawn`` together, on the same core as the event loop. Slots are short
lived and written behind anyway, so each flush appends a single row instead: the batch's granted
slots and released slot ids as JSON, stamped with the latest expiry in it. Rows wholly past
their expiry are dropped now and then.

Replaying the rows in order rebuilds the live set (:func:`replay`). The referee then filters it
by what *is* committed before an answer: a redeemed approval's id is in ``spent`` and a dead
parent's status is written, so a release that was still in memory when the daemon died costs
nothing. A grant lost in a crash under-counts for at most the approval's 60 s, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import cast, get_args

import orjson
import structlog

from roost.state.repos.journal import JournalRepository
from roost.state.sessions import SLOT_EXP, SLOT_JTI, Reservation, Slot, Trust
from roost.state.store import Op, Store

__all__ = ["COMPACT_EVERY_MS", "ReservationJournal", "decode_slot", "encode_slot", "replay"]

log = structlog.get_logger("roost.reservelog")

COMPACT_EVERY_MS = 1_000
_TRUST = frozenset(get_args(Trust))


def encode_slot(res: Slot) -> list[str | int | None]:
    """The slot's fields in declaration order (jti, parent_id, … job_id), as :func:`decode_slot` reads them."""
    return list(res)


def decode_slot(item: object) -> Reservation:
    """One journalled slot; ValueError when it is not the shape :func:`encode_slot` writes."""
    if not isinstance(item, list) or len(item) != 9:
        raise ValueError("a journalled slot is a list of 9 fields")
    jti, parent_id, name, version, sha256, depth, trust, exp_ms, job_id = item
    if not all(isinstance(v, str) for v in (jti, parent_id, name, version, sha256)):
        raise ValueError("a journalled slot's ids and coordinates are strings")
    if type(depth) is not int or type(exp_ms) is not int or trust not in _TRUST:
        raise ValueError("a journalled slot's depth, expiry or trust is malformed")
    if job_id is not None and not isinstance(job_id, str):
        raise ValueError("a journalled slot's job id is a string or null")
    return Reservation(
        jti=jti,
        parent_id=parent_id,
        name=name,
        version=version,
        sha256=sha256,
        depth=depth,
        trust=cast(Trust, trust),
        exp_ms=exp_ms,
        job_id=job_id,
    )


def replay(rows: Iterable[tuple[bytes | str, bytes | str]], now_ms: int) -> list[Reservation]:
    """The slots still held after applying ``(granted, released)`` rows in journal order.

    An unreadable row is skipped with a warning: losing its slots is the same under-count a
    crash before the flush would have caused, and refusing to start over it would be worse.
    """
    live: dict[str, Reservation] = {}
    for granted_raw, released_raw in rows:
        try:
            granted = [decode_slot(item) for item in orjson.loads(granted_raw)]
            released = orjson.loads(released_raw)
            if not isinstance(released, list) or not all(isinstance(j, str) for j in released):
                raise ValueError("released slot ids are a list of strings")
        except (ValueError, TypeError) as exc:
            log.warning("reservation_log_row_unreadable", error=str(exc))
            continue
        for res in granted:
            if res.exp_ms > now_ms:
                live[res.jti] = res
        for jti in released:
            live.pop(jti, None)
    return sorted(live.values(), key=lambda r: r.exp_ms)


class ReservationJournal:
    """Gathers grants and releases between flushes; the store drains it into one row.

    A slot granted and released within the same batch never reaches the disk at all.
    """

    def __init__(self, store: Store, clock: Callable[[], int]) -> None:
        self._store = store
        self.rows = JournalRepository(store)
        self._clock = clock
        self._granted: dict[str, Slot] = {}
        self._released: dict[str, int] = {}
        self._next_compact_ms = 0
        store.attach_behind(self.drain)

    def granted(self, slot: Slot) -> None:
        """A slot was granted (a :class:`Reservation`, or its fields as a plain tuple)."""
        self._granted[slot[SLOT_JTI]] = slot
        self._store.wake_behind()

    def released(self, slots: Iterable[Reservation]) -> None:
        for res in slots:
            if self._granted.pop(res.jti, None) is None:
                self._released[res.jti] = res.exp_ms
        if self._released:
            self._store.wake_behind()

    @property
    def pending(self) -> int:
        return len(self._granted) + len(self._released)

    def drain(self) -> list[Op]:
        """The ops for one flush: append this batch, and compact at most once a second."""
        ops: list[Op] = []
        if self._granted or self._released:
            granted, self._granted = self._granted, {}
            released, self._released = self._released, {}
            # The row lives as long as its latest slot, and a release as long as the grant it
            # cancels, so compaction never drops a release while its grant is still replayed.
            max_exp = max([slot[SLOT_EXP] for slot in granted.values()] + list(released.values()))
            ops.append(
                self.rows.append_op(
                    max_exp,
                    orjson.dumps([encode_slot(r) for r in granted.values()]),
                    orjson.dumps(list(released)),
                )
            )
        now_ms = self._clock()
        if ops and now_ms >= self._next_compact_ms:
            ops.append(self.rows.compact_op(now_ms))
            self._next_compact_ms = now_ms + COMPACT_EVERY_MS
        return ops

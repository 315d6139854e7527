"""The ``reservation_log`` table: the reservation journal's rows (:mod:`roost.services.referee.reservelog` says why)."""

from __future__ import annotations

from roost.state.store import Op, Store

__all__ = ["APPEND", "COMPACT", "JournalRepository"]

APPEND = "INSERT INTO reservation_log (max_exp_ms, granted, released) VALUES (?, ?, ?)"
COMPACT = "DELETE FROM reservation_log WHERE max_exp_ms <= ?"
UNEXPIRED = "SELECT granted, released FROM reservation_log WHERE max_exp_ms > ? ORDER BY seq"


class JournalRepository:
    def __init__(self, store: Store) -> None:
        self.store = store

    @staticmethod
    def append_op(max_exp_ms: int, granted: bytes, released: bytes) -> Op:
        return (APPEND, (max_exp_ms, granted, released))

    @staticmethod
    def compact_op(now_ms: int) -> Op:
        """Drop rows every slot of which expired by ``now_ms``."""
        return (COMPACT, (now_ms,))

    def unexpired_sync(self, now_ms: int) -> list[tuple[bytes, bytes]]:
        """``(granted, released)`` of each row still holding a live slot, in journal order (blocking)."""
        return [(row["granted"], row["released"]) for row in self.store.rows(UNEXPIRED, (now_ms,))]

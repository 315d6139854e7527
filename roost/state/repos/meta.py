"""The ``meta`` table: the daemon's own key/value facts (its instance id, whether it stopped in order)."""

from __future__ import annotations

from roost.state.store import Op, Store

__all__ = ["MetaRepository"]

GET = "SELECT value FROM meta WHERE key = ?"
PUT = "INSERT INTO meta (key, value) VALUES (?, ?)"
SET = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)"
DELETE = "DELETE FROM meta WHERE key = ?"


class MetaRepository:
    def __init__(self, store: Store) -> None:
        self.store = store

    def get_sync(self, key: str) -> str | None:
        rows = self.store.rows(GET, (key,))
        return str(rows[0]["value"]) if rows else None

    def put_sync(self, key: str, value: str) -> None:
        """Write ``key`` once (blocking; startup only)."""
        self.store.write_sync([(PUT, (key, value))])

    def delete_sync(self, key: str) -> None:
        """Remove ``key`` (blocking; startup only)."""
        self.store.write_sync([(DELETE, (key,))])

    @staticmethod
    def set_op(key: str, value: str) -> Op:
        return (SET, (key, value))

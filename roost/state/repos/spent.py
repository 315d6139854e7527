"""The ``spent`` table: approval ids already redeemed, kept while the approval could be presented."""

from __future__ import annotations

from roost.state.store import Op, Store

__all__ = ["SpentRepository"]

SPEND = "INSERT OR IGNORE INTO spent (jti, exp_ms) VALUES (?, ?)"
UNEXPIRED = "SELECT jti, exp_ms FROM spent WHERE exp_ms > ?"
EXPIRE = "DELETE FROM spent WHERE exp_ms <= ?"


def prune_sql(batch: int) -> str:
    """Delete up to ``batch`` ids whose approval expired at or before the bound parameter."""
    return f"DELETE FROM spent WHERE rowid IN (SELECT rowid FROM spent WHERE exp_ms <= ? LIMIT {int(batch)})"


class SpentRepository:
    def __init__(self, store: Store) -> None:
        self.store = store

    @staticmethod
    def spend_op(jti: str, exp_ms: int) -> Op:
        return (SPEND, (jti, exp_ms))

    @staticmethod
    def expire_op(now_ms: int) -> Op:
        return (EXPIRE, (now_ms,))

    def unexpired_sync(self, now_ms: int) -> list[tuple[str, int]]:
        """Ids whose approval is still valid at ``now_ms`` (blocking; startup only)."""
        return [(row["jti"], int(row["exp_ms"])) for row in self.store.rows(UNEXPIRED, (now_ms,))]

"""Leases: how long a session roost cannot watch stays alive without calling in.

A session with no verified pid and no launcher behind it holds a lease instead: any
authenticated call renews it (and ``roost-capsule`` calls ``POST /renew`` while it runs); when
it lapses the referee ends the session with the reason recorded, as if it had failed. This
module only keeps the expiries; it is pure (the caller passes the clock's reading).
"""

from __future__ import annotations

__all__ = ["Leases"]


class Leases:
    """The expiry (wall-clock ms) of each leased session, by session id."""

    def __init__(self) -> None:
        self.until: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.until)

    def grant(self, session_id: str, now_ms: int, lease_ms: int) -> None:
        self.until[session_id] = now_ms + lease_ms

    def renew(self, session_id: str, now_ms: int, lease_ms: int) -> int | None:
        """Push a held lease to ``now_ms + lease_ms`` and return it; None if it holds none."""
        if session_id not in self.until:
            return None
        until = self.until[session_id] = now_ms + lease_ms
        return until

    def lapsed(self, now_ms: int) -> list[str]:
        """Sessions whose lease ran out by ``now_ms``."""
        return [sid for sid, until in self.until.items() if until <= now_ms]

    def still_lapsed(self, session_id: str, now_ms: int) -> bool:
        """Whether the lease is still out at ``now_ms`` (not renewed meanwhile, not dropped)."""
        return self.until.get(session_id, now_ms + 1) <= now_ms

    def drop(self, session_id: str) -> None:
        self.until.pop(session_id, None)

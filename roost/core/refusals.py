"""Every refusal sentence the referee and the launcher answer with, and how each edge renders an
:mod:`roost.core.admission` decision.

The referee's sentences are upstream's, byte for byte, so an upstream capsule runtime reading
them sees no difference; they live in :class:`refusals`. A top-level launch (``POST /jobs``,
``roostctl spawn``) is this daemon's own surface and says the same thing in its own words:
:func:`for_register` and :func:`for_launch` turn one admission decision into each edge's
:class:`~roost.core.errors.Refused`.
"""

from __future__ import annotations

from typing import assert_never

from roost.core.admission import (
    CeilingReached,
    ConcurrencyReached,
    DepthExhausted,
    Draining,
    NotInSpawnAllow,
    Refusal,
    SpawnRefusal,
    UidSessionsReached,
)
from roost.core.errors import Refused

__all__ = ["for_launch", "for_register", "for_spawn", "refusals"]


class refusals:
    """The exact upstream sentences, in one place."""

    DRAINING_SPAWN = "this daemon is draining: it finishes running jobs and grants no new spawns"
    DRAINING_REGISTER = "this daemon is draining: it finishes running jobs and registers no new top-level sessions"

    @staticmethod
    def not_in_parent_allow(name: str) -> str:
        return f"capsule '{name}' is not in parent's spawn_allow"

    @staticmethod
    def not_in_spawn_allow(name: str) -> str:
        return f"capsule '{name}' is not in --spawn-allow"

    @staticmethod
    def depth(d: int) -> str:
        return (
            f"delegation depth bound reached: this daemon allows {d} levels of delegation below a "
            f"top-level capsule (--max-depth {d}), and this session has none left to spend — a capsule "
            "whose capabilities.spawn.allow names itself terminates here rather than recursing"
        )

    @staticmethod
    def ceiling(m: int, live: int) -> str:
        return (
            f"machine capsule ceiling reached: this daemon allows {m} live capsules on this host across "
            f"every formation (--max-live-capsules {m}), and it is already holding {live} — this is the "
            "host's ceiling rather than this capsule's own --max-concurrent, so narrowing the formation "
            "does not help; the same request may be granted once other capsules finish"
        )

    @staticmethod
    def uid_sessions(uid: int | None, limit: int, live: int) -> str:
        return (
            f"per-user quota reached: uid {uid} already holds {live} live sessions and this daemon allows "
            f"one user {limit} (uid_max_live_sessions), so that no one user fills the host's capsule "
            "ceiling; end some of them, or raise uid_max_live_sessions"
        )

    @staticmethod
    def uid_rate(uid: int | None, limit: int) -> str:
        return (
            f"per-user quota reached: uid {uid} made {limit} registrations in the last minute, the most this "
            "daemon allows one user (uid_registrations_per_minute); retry in a minute, or raise "
            "uid_registrations_per_minute"
        )

    @staticmethod
    def uid_jobs(uid: int | None, limit: int, live: int) -> str:
        return (
            f"per-user quota reached: uid {uid} already holds {live} live jobs and this daemon allows one "
            f"user {limit} (uid_max_live_jobs); wait for some to finish, or raise uid_max_live_jobs"
        )

    @staticmethod
    def concurrency(c: int, live: int) -> str:
        return (
            f"delegation concurrency bound reached: this daemon allows a capsule {c} live children at a "
            f"time (--max-concurrent {c}), and this session already holds {live} — wait for one to "
            "finish, or raise --max-concurrent"
        )

    EXPIRED = (
        "this spawn approval has passed its expiry; an approval is valid for 60 seconds from the "
        "POST /spawn that granted it"
    )
    REPLAYED = (
        "this spawn approval has already been redeemed; an approval covers one launch, so ask POST /spawn for another"
    )

    @staticmethod
    def coordinates(granted: str, asked: str) -> str:
        return f"this spawn approval was granted for '{granted}', not '{asked}'"

    @staticmethod
    def digest(coords: str, approved: str, resolved: str) -> str:
        return (
            f"'{coords}' now resolves to a different artifact than the one this spawn approval was "
            f"granted for (approved sha256 {approved}, resolved sha256 {resolved})"
        )


DRAINING_LAUNCH = "this daemon is draining: it finishes running jobs and starts no new ones"
"""``POST /jobs``'s own wording (a launch is this daemon's surface, not upstream's)."""


def for_register(refusal: Refusal) -> Refused:
    """``POST /register``'s refusal for a top-level session: upstream's sentence and class."""
    if isinstance(refusal, Draining):
        return Refused(refusals.DRAINING_REGISTER, "draining")
    if isinstance(refusal, NotInSpawnAllow):
        return Refused(refusals.not_in_spawn_allow(refusal.name), "spawn_allow")
    if isinstance(refusal, CeilingReached):
        return Refused(refusals.ceiling(refusal.limit, refusal.live), "ceiling")
    assert_never(refusal)


def for_launch(refusal: Refusal) -> Refused:
    """A top-level launch's refusal (``POST /jobs``, ``roostctl spawn``)."""
    if isinstance(refusal, Draining):
        return Refused(DRAINING_LAUNCH, "draining")
    if isinstance(refusal, NotInSpawnAllow):
        return Refused(refusals.not_in_spawn_allow(refusal.name), "spawn_allow")
    if isinstance(refusal, CeilingReached):
        return Refused(refusals.ceiling(refusal.limit, refusal.live), "ceiling")
    assert_never(refusal)


def for_spawn(refusal: SpawnRefusal) -> Refused:
    """``POST /spawn``'s refusal for a bound the parent would break: upstream's sentence and class."""
    if isinstance(refusal, DepthExhausted):
        return Refused(refusals.depth(refusal.max_depth), "depth")
    if isinstance(refusal, CeilingReached):
        return Refused(refusals.ceiling(refusal.limit, refusal.live), "ceiling")
    if isinstance(refusal, ConcurrencyReached):
        return Refused(refusals.concurrency(refusal.limit, refusal.live), "concurrency")
    if isinstance(refusal, UidSessionsReached):
        return Refused(refusals.uid_sessions(refusal.uid, refusal.limit, refusal.live), "quota_sessions")
    assert_never(refusal)

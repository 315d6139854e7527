"""Task provenance: who a task came from (origin) and whether its text is trusted (trust).

Why a sealed value object: trust must follow from origin, never be chosen beside it. The only
ways to get a :class:`Provenance` are :meth:`Provenance.from_wire` (the door's rule for HTTP
callers) and :meth:`Provenance.local_user` (a task the operator put in the
workdir). An HTTP caller can therefore never obtain origin ``user``/``schedule``/``system``, and
can only claim ``trusted`` together with a ``peer``/``completion`` origin — the design prevents
untrust laundering along an honest chain; it is not authentication.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NoReturn


class Origin(StrEnum):
    USER = "user"
    PEER = "peer"
    SCHEDULE = "schedule"
    EVENT = "event"
    COMPLETION = "completion"
    SYSTEM = "system"


class Trust(StrEnum):
    TRUSTED = "trusted"
    UNTRUSTED = "untrusted"


class Lane(StrEnum):
    """Queue lanes, highest priority first."""

    USER = "user"
    PEER = "peer"
    BG = "bg"

    @property
    def position(self) -> int:
        """Where the lane comes in :data:`LANE_ORDER` (0 first)."""
        return _LANE_POSITION[self._value_]


LANE_ORDER: tuple[Lane, ...] = (Lane.USER, Lane.PEER, Lane.BG)
_LANE_POSITION = {lane.value: i for i, lane in enumerate(LANE_ORDER)}

ORIGIN_HEADER = "x-murmur-task-origin"
TRUST_HEADER = "x-murmur-task-trust"

_WIRE_ORIGINS = {"peer": Origin.PEER, "completion": Origin.COMPLETION}
_WIRE_TRUST = {"trusted": Trust.TRUSTED, "untrusted": Trust.UNTRUSTED}
_SEAL = object()


class Provenance:
    """An (origin, trust) pair that can only be derived, never assembled by hand."""

    __slots__ = ("_lane", "_origin", "_trust")

    _origin: Origin
    _trust: Trust
    _lane: Lane

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("Provenance is derived: use Provenance.from_wire() or Provenance.local_user()")

    @classmethod
    def _derive(cls, origin: Origin, trust: Trust, seal: object) -> Provenance:
        if seal is not _SEAL:
            raise TypeError("Provenance is derived: use Provenance.from_wire() or Provenance.local_user()")
        obj = object.__new__(cls)
        object.__setattr__(obj, "_origin", origin)
        object.__setattr__(obj, "_trust", trust)
        object.__setattr__(obj, "_lane", lane_for(origin))  # read once per task: derived once
        return obj

    @classmethod
    def from_wire(cls, origin_header: str | None, trust_header: str | None) -> Provenance:
        """The door's rule: only ``peer``/``completion`` are taken from the wire (after lowercasing);
        their trust is the trust header if it is exactly ``trusted``/``untrusted``, else untrusted.
        Anything else is origin ``event``, trust ``untrusted``, and the trust header is not read.
        """
        origin = _WIRE_ORIGINS.get(origin_header.lower()) if origin_header else None
        if origin is None:
            return _DERIVED[Origin.EVENT, Trust.UNTRUSTED]
        trust = _WIRE_TRUST.get(trust_header.lower(), Trust.UNTRUSTED) if trust_header else Trust.UNTRUSTED
        return _DERIVED[origin, trust]

    @classmethod
    def local_user(cls) -> Provenance:
        """A task the operator gave through the workdir (task.md / input.json): user, trusted."""
        return cls._derive(Origin.USER, Trust.TRUSTED, _SEAL)

    @property
    def origin(self) -> Origin:
        return self._origin

    @property
    def trust(self) -> Trust:
        return self._trust

    @property
    def lane(self) -> Lane:
        return self._lane

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("Provenance is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("Provenance is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Provenance):
            return NotImplemented
        return self._origin == other._origin and self._trust == other._trust

    def __hash__(self) -> int:
        return hash((self._origin, self._trust))

    def __repr__(self) -> str:
        return f"Provenance(origin={self._origin.value!r}, trust={self._trust.value!r})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("Provenance cannot be pickled; derive it again")


def lane_for(origin: Origin) -> Lane:
    """``user``→user, ``peer``→peer, everything else (schedule, event, completion, system)→bg."""
    if origin is Origin.USER:
        return Lane.USER
    if origin is Origin.PEER:
        return Lane.PEER
    return Lane.BG


# Provenances are immutable values: the few the wire can yield are derived once and shared.
_DERIVED = {(o, t): Provenance._derive(o, t, _SEAL) for o in Origin for t in Trust}


_OUTBOUND = {
    (o, t): {ORIGIN_HEADER: o.value, TRUST_HEADER: t.value} for o in (Origin.PEER, Origin.COMPLETION) for t in Trust
}


def outbound_headers(origin: Origin, trust: Trust) -> dict[str, str]:
    """Headers a sender stamps (a new dict). Only ``peer`` and ``completion`` are meaningful on the wire."""
    headers = _OUTBOUND.get((origin, trust))
    if headers is None:
        raise ValueError(f"origin {origin.value!r} cannot be sent on the wire; use peer or completion")
    return dict(headers)

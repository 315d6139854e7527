"""Checks 2–10 of a redeem, with no I/O: is this token a valid handle for the audience it asserts?

The check order and why it is that order are in :mod:`roost.services.peer.redeem`. This module decides
from the token, the asserted audience, the running session its unverified ``iss`` names (one
table lookup) and the clock; the file itself is opened afterwards, through the session-files
port, on whichever machine holds the session's workdir.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from roost.core import peerpaths as paths
from roost.core import tokens
from roost.services.peer.errors import (
    HandleExpired,
    HandleNotValid,
    MalformedHandle,
    MissingAudience,
    NoPeerPlane,
    OutsideRoot,
)
from roost.state.keys import KeyRing
from roost.state.sessions import SessionRecord

__all__ = ["MAX_AUDIENCE", "Verified", "claimed_path", "claimed_session", "verified_claimant", "verify"]

MAX_AUDIENCE: Final = 512
"""Longest ``x-murmur-audience`` considered (``name@host:port``); a longer one is no audience."""


@dataclass(frozen=True, slots=True)
class Verified:
    """A handle that passed checks 2–9, with the components of its ``p`` (check 10's pure half)."""

    rec: SessionRecord
    claims: tokens.HandleClaims
    components: tuple[str, ...]


def _unverified_iss(payload: bytes) -> str | None:
    try:
        obj = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    iss = obj.get("iss") if isinstance(obj, dict) else None
    return iss if isinstance(iss, str) and iss else None


def claimed_session(token: str, lookup: Callable[[str], SessionRecord | None]) -> SessionRecord | None:
    """The running session a token's unverified ``iss`` names (only to choose a trace file)."""
    try:
        parts = tokens.split(token, tokens.HANDLE_TAG)
    except tokens.Malformed:
        return None
    iss = _unverified_iss(parts.payload_bytes)
    return lookup(iss) if iss is not None else None


def claimed_path(token: str) -> str | None:
    """The handle's ``p`` as its payload carries it: only for a token whose MAC verified (a
    payload that failed it is caller-controlled and is not recorded as fact)."""
    try:
        return tokens.parse_handle_payload(tokens.split(token, tokens.HANDLE_TAG).payload_bytes).p
    except tokens.Malformed:
        return None


def verified_claimant(
    token: str,
    audience_values: Sequence[str],
    lookup: Callable[[str], SessionRecord | None],
    rings: Sequence[KeyRing],
) -> SessionRecord | None:
    """The session a refused token names, only if its MAC verifies (so its trace may record it)."""
    rec = claimed_session(token, lookup)
    if rec is None or len(audience_values) != 1 or len(audience_values[0]) > MAX_AUDIENCE:
        return None
    try:
        parts = tokens.split(token, tokens.HANDLE_TAG)
    except tokens.Malformed:
        return None
    audience = audience_values[0].strip()
    for ring in rings:
        key = ring.handle_key(rec.session_id, rec.handle_salt)
        if tokens.mac_ok(key, tokens.HANDLE_DOMAIN, parts.payload_segment, parts.mac, audience):
            return rec
    return None


def verify(
    token: str,
    audience_values: Sequence[str],
    *,
    lookup: Callable[[str], SessionRecord | None],
    keys_for: Callable[[SessionRecord], Sequence[bytes]],
    now_ms: int,
) -> Verified:
    """Checks 2–10 (pure half) in order; raise the :class:`PeerError` of the first that fails.

    ``lookup`` returns a *running* session or ``None``; ``audience_values`` are every
    ``x-murmur-audience`` header sent (more than one is as good as none: ambiguous).
    """
    try:
        parts = tokens.split(token, tokens.HANDLE_TAG)
    except tokens.Malformed:
        raise MalformedHandle() from None
    if len(audience_values) != 1 or not audience_values[0].strip() or len(audience_values[0]) > MAX_AUDIENCE:
        raise MissingAudience()
    audience = audience_values[0].strip()
    iss = _unverified_iss(parts.payload_bytes)
    rec = lookup(iss) if iss is not None else None
    if rec is None:
        raise HandleNotValid()
    segment, mac = parts.payload_segment, parts.mac
    if not any(tokens.mac_ok(k, tokens.HANDLE_DOMAIN, segment, mac, audience) for k in keys_for(rec)):
        raise HandleNotValid()
    if rec.manifest.exports.peer_files is None:
        raise NoPeerPlane()
    try:
        claims = tokens.parse_handle_payload(parts.payload_bytes)
    except tokens.Malformed:
        raise MalformedHandle() from None
    if claims.iss != rec.session_id:
        raise HandleNotValid()
    if claims.exp <= now_ms:
        raise HandleExpired()
    try:
        components = paths.handle_components(claims.p)
    except paths.PathRefused:
        raise OutsideRoot() from None
    return Verified(rec, claims, components)

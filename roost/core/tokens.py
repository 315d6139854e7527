"""One MAC-token codec for the three token families the daemon mints (upstream ``mac_token.rs``).

Grammar (upstream's, byte for byte; see also ``docs/security.md``, Tokens)::

    <tag> "." b64url_nopad(payload JSON) "." b64url_nopad(HMAC-SHA256(key, mac_input))
    mac_input = domain ‖ 0x1F ‖ <payload segment, ASCII as in the token> [‖ 0x1F ‖ bound (UTF-8)]…

=========== ====== ============================== =========================================
family      tag    MAC domain                     payload (field order as serialised)
=========== ====== ============================== =========================================
credential  msc1   murmur-spawn-credential-v1     ``v, sid, n``
approval    msa1   murmur-spawn-approval-v1       ``v, sid, name, version, digest, depth, exp, jti``
peer handle mh1    murmur-peer-handle-v1          ``v, iss, p, exp, n`` (+ audience MAC-bound)
node keeper mnk1   mur-roost-node-keeper-v1       ``v, node, n`` (roost's own; not upstream's)
=========== ====== ============================== =========================================

The verify order is fixed and nothing below the MAC is looked at before the MAC passes:
shape → constant-time MAC → JSON parse into exact types → version → (approval/handle) expiry.
Replay (an approval's ``jti``) is the store's business, not the codec's.

Why the module is shaped like this:

* The referee mints and verifies on every request, so the codec is stdlib only (``hmac``,
  ``hashlib``, ``base64``, ``json``) and allocates little; domain prefixes are module constants.
* Every spawn-token failure below expiry collapses into one :class:`Unauthenticated` whose text is
  fixed, so nothing a client sees depends on *why* a token failed (no forgery oracle).
* The peer-plane redeem path must tell ``malformed_handle`` (400) from ``handle_not_valid`` (403)
  and interleave the audience check between them, so its steps are exposed separately
  (:func:`split`, :func:`mac_ok`, :func:`parse_handle_payload`) as well as bundled
  (:func:`verify_handle`).
* No exception, repr or message ever contains a token, a MAC or a key; at most a
  :func:`~roost.core.ids.token_id`, which callers compute themselves.
"""

from __future__ import annotations

import binascii
import hmac
import json
import re
from dataclasses import dataclass, field
from typing import Final, NamedTuple, NoReturn

from roost.core.ids import nonce_hex

__all__ = [
    "APPROVAL_DOMAIN",
    "APPROVAL_TAG",
    "CREDENTIAL_DOMAIN",
    "CREDENTIAL_TAG",
    "HANDLE_DOMAIN",
    "HANDLE_TAG",
    "KEEPER_DOMAIN",
    "KEEPER_TAG",
    "ApprovalClaims",
    "ApprovalExpired",
    "CredentialClaims",
    "Expired",
    "HandleClaims",
    "HandleExpired",
    "Malformed",
    "TokenError",
    "TokenParts",
    "Unauthenticated",
    "mac_ok",
    "mint_approval",
    "mint_credential",
    "mint_handle",
    "mint_keeper",
    "parse_handle_payload",
    "split",
    "verify_approval",
    "verify_credential",
    "verify_handle",
    "verify_keeper",
]

CREDENTIAL_TAG: Final = "msc1"
CREDENTIAL_DOMAIN: Final = "murmur-spawn-credential-v1"
APPROVAL_TAG: Final = "msa1"
APPROVAL_DOMAIN: Final = "murmur-spawn-approval-v1"
HANDLE_TAG: Final = "mh1"
HANDLE_DOMAIN: Final = "murmur-peer-handle-v1"
KEEPER_TAG: Final = "mnk1"
KEEPER_DOMAIN: Final = "mur-roost-node-keeper-v1"

_SEP: Final = b"\x1f"
_U8_MAX: Final = 2**8 - 1
_U32_MAX: Final = 2**32 - 1
_U64_MAX: Final = 2**64 - 1
_MAC_LEN: Final = 32

# `fullmatch`, never `match` + `$`: `$` also matches before a trailing newline.
_B64URL_RE: Final = re.compile(r"[A-Za-z0-9_-]+")
_B64_ALPHABET: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_B64_INDEX: Final = {c: i for i, c in enumerate(_B64_ALPHABET)}
_URLSAFE_TO_STD: Final = bytes.maketrans(b"-_", b"+/")
# Chars in the final quantum -> mask of the last char's bits that carry no data.
_UNUSED_BITS: Final = {2: 0x0F, 3: 0x03}

# Keyed HMAC states (inner/outer pads already absorbed), copied per call: about 40% cheaper than
# hmac.digest(), which re-derives the pads from the key every time. Keys are few (one per family,
# one per live session for handles); the bound only stops unbounded growth from handle sessions.
_HMAC_CACHE: dict[bytes, hmac.HMAC] = {}
_HMAC_CACHE_MAX: Final = 1024

# domain ‖ 0x1F, computed once per domain rather than on every mint/verify.
_PREFIX_CACHE: dict[str, bytes] = {
    d: d.encode("ascii") + _SEP for d in (CREDENTIAL_DOMAIN, APPROVAL_DOMAIN, HANDLE_DOMAIN)
}


# --------------------------------------------------------------------------------------------
# Exceptions (itsdangerous style: one tree, mapped to HTTP at the edge)


class TokenError(Exception):
    """Base of every refusal the codec raises; the message is fixed per class, never the token."""

    message: str = "the token was refused"

    def __init__(self) -> None:
        super().__init__(self.message)


class Unauthenticated(TokenError):
    """The token is not one this key minted (shape, MAC, payload or version failed).

    For spawn tokens every such cause is reported as exactly this class, so a caller cannot leak
    which check failed. For handles the post-MAC iss mismatch is also reported as this class.
    """

    message = "the token is not valid"


class Malformed(Unauthenticated):
    """A handle that is not a well-formed token (pre-MAC shape, or post-MAC payload/version).

    A subclass of :class:`Unauthenticated` so that code which only cares "accepted or not" needs
    one ``except``; the peer plane catches it first to answer ``malformed_handle`` (400).
    """

    message = "the token is not well-formed"


class Expired(TokenError):
    """The token verified but its ``exp`` is at or before now; carries the verified claims."""

    message = "the token has expired"

    def __init__(self, claims: ApprovalClaims | HandleClaims) -> None:
        super().__init__()
        self.claims = claims


class ApprovalExpired(Expired):
    """A verified spawn approval whose ``exp <= now_ms``."""

    message = "the spawn approval has expired"


class HandleExpired(Expired):
    """A verified peer handle whose ``exp <= now_ms`` (410 ``handle_expired``)."""

    message = "the handle has expired"


# --------------------------------------------------------------------------------------------
# Claims


@dataclass(frozen=True, slots=True)
class CredentialClaims:
    """A verified ``msc1`` payload: the session it was minted for and its nonce."""

    sid: str
    n: str


class ApprovalClaims(NamedTuple):
    """A verified ``msa1`` payload; ``exp`` is Unix milliseconds, ``jti`` the single-use id.

    A tuple rather than a frozen dataclass: the referee makes one per grant, and a tuple is
    several times cheaper to build.
    """

    sid: str
    name: str
    version: str
    digest: str
    depth: int
    exp: int
    jti: str


@dataclass(frozen=True, slots=True)
class HandleClaims:
    """A parsed ``mh1`` payload: issuing session, root-relative path, expiry (ms), nonce."""

    iss: str
    p: str
    exp: int
    n: str


@dataclass(frozen=True, slots=True)
class TokenParts:
    """A token that passed the shape check; the MAC is hidden from ``repr`` (it is the bearer part)."""

    payload_segment: str
    payload_bytes: bytes = field(repr=False)
    mac: bytes = field(repr=False)


# --------------------------------------------------------------------------------------------
# Encoding primitives


_URLSAFE: Final = bytes.maketrans(b"+/", b"-_")


def _b64encode(data: bytes) -> str:
    """Unpadded base64url (``base64.urlsafe_b64encode`` without its two Python-level frames)."""
    return binascii.b2a_base64(data, newline=False).translate(_URLSAFE).rstrip(b"=").decode("ascii")


def _b64decode_strict(segment: str) -> bytes | None:
    """Decode unpadded base64url exactly as Rust's ``URL_SAFE_NO_PAD`` does, else ``None``.

    Rejects ``=``, characters outside the alphabet, impossible lengths (``len % 4 == 1``) and
    non-canonical final characters (non-zero unused low bits), which Python's lenient decoder
    would accept. Checking those bits directly is equivalent to "re-encoding gives back the
    segment" and avoids a second encode on the hot path (a property test pins the equivalence).
    """
    rem = len(segment) % 4
    if rem == 1 or not _B64URL_RE.fullmatch(segment):
        return None
    if rem and _B64_INDEX[segment[-1]] & _UNUSED_BITS[rem]:
        return None
    raw = segment.encode("ascii").translate(_URLSAFE_TO_STD)
    if rem:
        raw += b"=" * (4 - rem)
    try:
        return binascii.a2b_base64(raw)
    except binascii.Error:  # pragma: no cover - unreachable after the checks above
        return None


def _prefix(domain: str) -> bytes:
    prefix = _PREFIX_CACHE.get(domain)
    if prefix is None:
        prefix = domain.encode("utf-8") + _SEP
    return prefix


def _mac(key: bytes, domain: str, payload_segment: str, bound: tuple[str, ...]) -> bytes:
    msg = _prefix(domain) + payload_segment.encode("ascii")
    for value in bound:
        # surrogateescape: a header aiohttp decoded from non-UTF-8 bytes MACs as those bytes.
        msg += _SEP + value.encode("utf-8", "surrogateescape")
    base = _HMAC_CACHE.get(key)
    if base is None:
        if len(_HMAC_CACHE) >= _HMAC_CACHE_MAX:
            _HMAC_CACHE.clear()
        base = _HMAC_CACHE[key] = hmac.new(key, digestmod="sha256")
    h = base.copy()
    h.update(msg)
    return h.digest()


def _dumps(payload: dict[str, object]) -> bytes:
    # serde's compact form with raw UTF-8, so our tokens are byte-identical to upstream's.
    return _ENCODER.encode(payload).encode("utf-8")


def _mint(key: bytes, tag: str, domain: str, payload: dict[str, object], *bound: str) -> str:
    segment = _b64encode(_dumps(payload))
    return f"{tag}.{segment}.{_b64encode(_mac(key, domain, segment, bound))}"


def split(token: str, tag: str) -> TokenParts:
    """Shape check: exactly three segments, ``tag`` first, both others strict base64url, non-empty.

    Raises :class:`Malformed`. Does not look at the MAC's length (a short MAC is *invalid*, 403,
    not malformed: :func:`mac_ok` returns ``False`` for it).
    """
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != tag:
        raise Malformed
    payload = _b64decode_strict(parts[1])
    mac = _b64decode_strict(parts[2])
    if not payload or not mac:
        raise Malformed
    return TokenParts(parts[1], payload, mac)


def mac_ok(key: bytes, domain: str, payload_segment: str, mac: bytes, *bound: str) -> bool:
    """Constant-time check of ``mac`` over (domain, payload segment as presented, bound values…).

    A MAC of the wrong length, or input that cannot be encoded, is simply not valid.
    """
    try:
        expected = _mac(key, domain, payload_segment, bound)
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(expected, mac)


# --------------------------------------------------------------------------------------------
# Payload parsing: exact types, as serde would deserialise the Rust structs


def _reject_constant(_: str) -> NoReturn:
    raise ValueError("NaN/Infinity are not JSON")


# Built once: json.dumps/json.loads with non-default arguments construct a coder on every call.
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def _load_object(payload: bytes) -> dict[str, object] | None:
    """Strict UTF-8 JSON object, or ``None`` (json.loads on bytes would also sniff UTF-16/32)."""
    try:
        obj = _DECODER.decode(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _uint(obj: dict[str, object], key: str, maximum: int) -> int | None:
    value = obj.get(key)
    if type(value) is not int or not 0 <= value <= maximum:  # bool is not int here; floats refused
        return None
    return value


def _str(obj: dict[str, object], key: str) -> str | None:
    value = obj.get(key)
    if type(value) is not str:
        return None
    if not value.isascii():
        # serde refuses lone surrogates ("\\ud800"), which Python's json would accept.
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return None
    return value


def _version_ok(obj: dict[str, object]) -> bool | None:
    """``None``: ``v`` missing or not a u8 (parse failure); else whether it is 1."""
    v = _uint(obj, "v", _U8_MAX)
    return None if v is None else v == 1


def _parse_credential(payload: bytes) -> CredentialClaims | None:
    obj = _load_object(payload)
    if obj is None:
        return None
    sid, n = _str(obj, "sid"), _str(obj, "n")
    if sid is None or n is None or not _version_ok(obj):
        return None
    return CredentialClaims(sid, n)


def _parse_approval(payload: bytes) -> ApprovalClaims | None:
    obj = _load_object(payload)
    if obj is None:
        return None
    sid, name, version = _str(obj, "sid"), _str(obj, "name"), _str(obj, "version")
    digest, jti = _str(obj, "digest"), _str(obj, "jti")
    depth, exp = _uint(obj, "depth", _U32_MAX), _uint(obj, "exp", _U64_MAX)
    if (
        sid is None
        or name is None
        or version is None
        or digest is None
        or jti is None
        or depth is None
        or exp is None
        or not _version_ok(obj)
    ):
        return None
    return ApprovalClaims(sid, name, version, digest, depth, exp, jti)


def parse_handle_payload(payload: bytes) -> HandleClaims:
    """Parse a MAC-verified ``mh1`` payload into exact types and check ``v == 1``.

    Raises :class:`Malformed` (upstream answers a post-MAC parse or version failure with
    ``malformed_handle``). Unknown fields are ignored, as serde does without ``deny_unknown_fields``.
    """
    obj = _load_object(payload)
    if obj is None:
        raise Malformed
    iss, p, n = _str(obj, "iss"), _str(obj, "p"), _str(obj, "n")
    exp = _uint(obj, "exp", _U64_MAX)
    if iss is None or p is None or n is None or exp is None or not _version_ok(obj):
        raise Malformed
    return HandleClaims(iss, p, exp, n)


# --------------------------------------------------------------------------------------------
# Credential (msc1)


def mint_credential(key: bytes, sid: str) -> tuple[str, CredentialClaims]:
    """Mint a session credential for ``sid`` with a fresh 32-hex nonce; returns the token and
    the claims it carries (the session record keeps the nonce)."""
    claims = CredentialClaims(sid, nonce_hex())
    return _mint(key, CREDENTIAL_TAG, CREDENTIAL_DOMAIN, {"v": 1, "sid": claims.sid, "n": claims.n}), claims


def verify_credential(key: bytes, token: str) -> CredentialClaims:
    """Verify a credential; any failure raises a bare :class:`Unauthenticated`.

    Whether the session is still running is the caller's check.
    """
    try:
        parts = split(token, CREDENTIAL_TAG)
    except Malformed:
        raise Unauthenticated from None
    if not mac_ok(key, CREDENTIAL_DOMAIN, parts.payload_segment, parts.mac):
        raise Unauthenticated
    claims = _parse_credential(parts.payload_bytes)
    if claims is None:
        raise Unauthenticated
    return claims


# --------------------------------------------------------------------------------------------
# Approval (msa1)


def mint_approval(
    key: bytes,
    *,
    sid: str,
    name: str,
    version: str,
    digest: str,
    depth: int,
    exp_ms: int,
    jti: str | None = None,
) -> tuple[str, ApprovalClaims]:
    """Mint a spawn approval; returns the token and the claims it carries (for the store).

    ``depth`` must fit a u32 and ``exp_ms`` a u64, else :class:`ValueError`: minting a token that
    could never verify is a programming error, not a refusal.
    """
    if type(depth) is not int or not 0 <= depth <= _U32_MAX:
        raise ValueError("depth must be an integer in 0..2**32-1")
    if type(exp_ms) is not int or not 0 <= exp_ms <= _U64_MAX:
        raise ValueError("exp_ms must be an integer in 0..2**64-1")
    if jti is None:
        return _mint_approval_fast(key, ApprovalClaims(sid, name, version, digest, depth, exp_ms, nonce_hex()))
    claims = ApprovalClaims(sid, name, version, digest, depth, exp_ms, jti)
    payload = {
        "v": 1,
        "sid": claims.sid,
        "name": claims.name,
        "version": claims.version,
        "digest": claims.digest,
        "depth": claims.depth,
        "exp": claims.exp,
        "jti": claims.jti,
    }
    return _mint(key, APPROVAL_TAG, APPROVAL_DOMAIN, payload), claims


# A referee mints approvals that differ only in ``exp`` and ``jti``: for one key, parent, artifact
# and depth the JSON up to ``"exp":`` never changes, so its base64 (cut at a multiple of 3 bytes,
# where base64 of a concatenation is the concatenation) and the MAC state over it are kept.
_ApprovalHead = tuple[str, bytes, "hmac.HMAC"]
_APPROVAL_HEADS: dict[tuple[bytes, str, str, str, str, int], _ApprovalHead] = {}
_APPROVAL_HEADS_MAX: Final = 4096
_EXP_PLACEHOLDER: Final = b'"exp":0}'


def _approval_head(key: bytes, c: ApprovalClaims) -> _ApprovalHead:
    k = (key, c.sid, c.name, c.version, c.digest, c.depth)
    head = _APPROVAL_HEADS.get(k)
    if head is None:
        raw = _dumps(
            {"v": 1, "sid": c.sid, "name": c.name, "version": c.version, "digest": c.digest, "depth": c.depth, "exp": 0}
        )
        assert raw.endswith(_EXP_PLACEHOLDER)
        raw = raw[: -len(b"0}")]
        cut = len(raw) - len(raw) % 3
        b64 = _b64encode(raw[:cut])
        state = hmac.new(key, _prefix(APPROVAL_DOMAIN) + b64.encode("ascii"), digestmod="sha256")
        if len(_APPROVAL_HEADS) >= _APPROVAL_HEADS_MAX:
            _APPROVAL_HEADS.clear()
        head = _APPROVAL_HEADS[k] = (b64, raw[cut:], state)
    return head


def _mint_approval_fast(key: bytes, claims: ApprovalClaims) -> tuple[str, ApprovalClaims]:
    """Byte-identical to the general path (a property test holds them together) for a hex jti."""
    b64_head, tail, state = _approval_head(key, claims)
    rest = _b64encode(tail + b'%d,"jti":"%s"}' % (claims.exp, claims.jti.encode("ascii")))
    mac = state.copy()
    mac.update(rest.encode("ascii"))
    return f"{APPROVAL_TAG}.{b64_head}{rest}.{_b64encode(mac.digest())}", claims


def verify_approval(key: bytes, token: str, *, now_ms: int) -> ApprovalClaims:
    """Verify an approval: :class:`Unauthenticated` for anything below expiry, then
    :class:`ApprovalExpired` when ``exp <= now_ms``. Replay is checked by the caller."""
    try:
        parts = split(token, APPROVAL_TAG)
    except Malformed:
        raise Unauthenticated from None
    if not mac_ok(key, APPROVAL_DOMAIN, parts.payload_segment, parts.mac):
        raise Unauthenticated
    claims = _parse_approval(parts.payload_bytes)
    if claims is None:
        raise Unauthenticated
    if claims.exp <= now_ms:
        raise ApprovalExpired(claims)
    return claims


# --------------------------------------------------------------------------------------------
# Peer handle (mh1)


def mint_handle(key: bytes, *, iss: str, path: str, exp_ms: int, audience: str) -> str:
    """Mint a peer-file handle for ``path`` bound (by MAC only) to ``audience``.

    The audience must be non-empty and free of 0x1F, the MAC field separator.
    """
    if not audience or "\x1f" in audience:
        raise ValueError("audience must be non-empty and contain no 0x1F")
    if type(exp_ms) is not int or not 0 <= exp_ms <= _U64_MAX:
        raise ValueError("exp_ms must be an integer in 0..2**64-1")
    payload = {"v": 1, "iss": iss, "p": path, "exp": exp_ms, "n": nonce_hex()}
    return _mint(key, HANDLE_TAG, HANDLE_DOMAIN, payload, audience)


def verify_handle(key: bytes, token: str, *, audience: str, iss: str, now_ms: int) -> HandleClaims:
    """Verify a handle in the redeem order (shape → MAC → parse → version → iss → exp).

    Raises :class:`Malformed` (shape, or payload/version after the MAC), bare
    :class:`Unauthenticated` (MAC, including a wrong audience, key or family, and a foreign
    ``iss``) or :class:`HandleExpired`. The audience-presence check (between shape and MAC)
    belongs to the caller, which holds the request header.
    """
    parts = split(token, HANDLE_TAG)
    if not mac_ok(key, HANDLE_DOMAIN, parts.payload_segment, parts.mac, audience):
        raise Unauthenticated
    claims = parse_handle_payload(parts.payload_bytes)
    if claims.iss != iss:  # unreachable with a valid MAC unless keys are shared; kept for defence
        raise Unauthenticated
    if claims.exp <= now_ms:
        raise HandleExpired(claims)
    return claims


# --------------------------------------------------------------------------------------------
# Node keeper (mnk1): what a keeper on another node shows to fetch artifacts by sha256


def mint_keeper(key: bytes, node_id: str) -> str:
    """Mint a node keeper's token for ``node_id`` (no expiry: key rotation revokes it)."""
    return _mint(key, KEEPER_TAG, KEEPER_DOMAIN, {"v": 1, "node": node_id, "n": nonce_hex()})


def verify_keeper(key: bytes, token: str) -> str:
    """The node id a keeper token was minted for; any failure raises a bare :class:`Unauthenticated`."""
    try:
        parts = split(token, KEEPER_TAG)
    except Malformed:
        raise Unauthenticated from None
    if not mac_ok(key, KEEPER_DOMAIN, parts.payload_segment, parts.mac):
        raise Unauthenticated
    obj = _load_object(parts.payload_bytes)
    node = None if obj is None else _str(obj, "node")
    if obj is None or node is None or _str(obj, "n") is None or not _version_ok(obj):
        raise Unauthenticated
    return node

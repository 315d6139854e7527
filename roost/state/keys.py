"""The daemon's MAC keys: one 32-byte master key, per-purpose subkeys derived with HKDF-SHA256.

Why derive instead of using the master key directly: each token family gets its own key, so a
bug that leaks or misuses one family's key cannot forge another's (defence in depth on top of the
distinct tag + MAC domain pairs), and the logged ``key_id`` reveals nothing about any MAC key.

Upstream keeps the key in memory only (restart = revoke everything). We also offer a persisted
key (``state_dir/master.key``) so tokens survive a daemon restart when the operator wants that;
:meth:`KeyRing.ephemeral` keeps the upstream behaviour and :meth:`KeyRing.rotate` revokes every
outstanding token on demand — at once by default, or after a grace (:meth:`KeyHolder.rotate`
with ``grace_secs``): during it the old key still *verifies* (credentials, approvals, handles,
keeper tokens) but never mints, and the sessions registered before the rotation keep the door
key they were given, so the daemon's seals on their doors keep verifying. The old key lives in
memory only: a restart ends the grace.

Peer handles get a per-session key derived from the session id *and* a random salt the caller
stores with the session: deleting the session's record (and so its salt) kills its handles, and
a relaunch with the same session id but a new salt cannot redeem the old ones.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from a2a.protocol import seal
from roost.system.blocking import BlockingExecutor
from roost.system.fsutil import write_atomic

__all__ = ["KEY_FILE_NAME", "KEY_LEN", "Grace", "KeyFileError", "KeyHolder", "KeyRing"]

KEY_LEN: Final = 32
KEY_FILE_NAME: Final = "master.key"
_INFO_PREFIX: Final = b"mur-roost/v1/"
_HANDLE_CACHE_MAX: Final = 4096
_DOOR_KEY_CACHE_MAX: Final = 4096


class KeyFileError(Exception):
    """The key file cannot be used; the message is one sentence saying what to do."""


def _hkdf(master: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_LEN, salt=None, info=info).derive(master)


class KeyRing:
    """A master key and the subkeys derived from it. ``repr`` shows only the ``key_id``."""

    __slots__ = ("_approval", "_credential", "_handle_cache", "_key_id", "_master")

    def __init__(self, master: bytes) -> None:
        if len(master) != KEY_LEN:
            raise ValueError(f"a master key is {KEY_LEN} bytes")
        self._master = bytes(master)
        # Derived once: the codec asks for these on every request.
        self._credential = self.subkey("credential")
        self._approval = self.subkey("approval")
        self._key_id = hashlib.sha256(self.subkey("key-id")).hexdigest()[:16]
        self._handle_cache: OrderedDict[tuple[str, str], bytes] = OrderedDict()

    def __repr__(self) -> str:
        return f"KeyRing(key_id={self._key_id!r})"

    __str__ = __repr__

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a KeyRing is not picklable; it would copy the master key")

    # ---- derivation ------------------------------------------------------------------------

    def subkey(self, purpose: str) -> bytes:
        """HKDF-SHA256(master, info = ``b"mur-roost/v1/" + purpose``), 32 bytes."""
        return _hkdf(self._master, _INFO_PREFIX + purpose.encode("utf-8"))

    @property
    def credential_key(self) -> bytes:
        """Key for ``msc1`` session credentials."""
        return self._credential

    @property
    def approval_key(self) -> bytes:
        """Key for ``msa1`` spawn approvals."""
        return self._approval

    @property
    def key_id(self) -> str:
        """First 16 hex of sha256 of the ``key-id`` subkey: identifies the key, safe to log."""
        return self._key_id

    def handle_key(self, session_id: str, session_salt: str) -> bytes:
        """Per-session key for ``mh1`` handles.

        info = ``b"mur-roost/v1/handle" ‖ 0x1F ‖ session_id ‖ 0x1F ‖ session_salt``; the
        separator cannot occur in either value (checked), so the pair is unambiguous. Results are
        kept in a bounded LRU so a redeem does not pay for HKDF each time.
        """
        if not session_id or not session_salt:
            raise ValueError("session_id and session_salt must be non-empty")
        if "\x1f" in session_id or "\x1f" in session_salt:
            raise ValueError("session_id and session_salt must not contain 0x1F")
        cache_key = (session_id, session_salt)
        cached = self._handle_cache.get(cache_key)
        if cached is not None:
            self._handle_cache.move_to_end(cache_key)
            return cached
        info = _INFO_PREFIX + b"handle\x1f" + session_id.encode("utf-8") + b"\x1f" + session_salt.encode("utf-8")
        key = _hkdf(self._master, info)
        self._handle_cache[cache_key] = key
        if len(self._handle_cache) > _HANDLE_CACHE_MAX:
            self._handle_cache.popitem(last=False)
        return key

    # ---- construction ----------------------------------------------------------------------

    @classmethod
    def ephemeral(cls) -> KeyRing:
        """A key that lives in memory only: a restart revokes every token (upstream behaviour)."""
        return cls(os.urandom(KEY_LEN))

    @classmethod
    def load_or_create(cls, state_dir: Path) -> KeyRing:
        """Load ``state_dir/master.key``, creating it (0600, exclusive, fsynced) if absent.

        Refuses with :class:`KeyFileError` a key file that is a symlink, not a regular file,
        readable or writable by group or others, or not exactly 32 bytes.
        """
        state_dir = Path(state_dir)
        path = state_dir / KEY_FILE_NAME
        try:
            return cls(_read_key(path))
        except FileNotFoundError:
            pass
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        master = os.urandom(KEY_LEN)
        # Exclusive: the temp file is linked into place, which never replaces an existing file,
        # so a crash cannot leave a short master.key.
        try:
            write_atomic(path, master, mode=0o600, exclusive=True)
        except FileExistsError:
            # Another process created it first: use theirs.
            return cls(_read_key(path))
        return cls(master)

    @classmethod
    def rotate(cls, state_dir: Path) -> KeyRing:
        """Replace ``state_dir/master.key`` atomically with a new key; every old token dies.

        temp file (0600, exclusive) + fsync + ``os.replace`` + fsync of the directory.
        """
        state_dir = Path(state_dir)
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        master = os.urandom(KEY_LEN)
        write_atomic(state_dir / KEY_FILE_NAME, master, mode=0o600)
        return cls(master)


@dataclass(frozen=True, slots=True)
class Grace:
    """The key ring a rotation replaced, still verifying until ``until`` (monotonic seconds), and
    the sessions registered before it (their doors hold a door key of that ring)."""

    ring: KeyRing
    until: float
    sessions: frozenset[str]


class KeyHolder:
    """The key ring in force, shared by everyone who signs or checks a token.

    Why a holder: a rotation must reach the referee, the peer plane, the relay and the launcher
    at once. Each holds this object and reads :attr:`ring` when it needs a key, so rotating is
    one swap here and nobody is rewired. A :class:`KeyRing` itself never changes, so a cache
    keyed on the ring (``is``) notices a rotation by itself.

    ``state_dir`` None: the key lives in memory only (``--ephemeral-keys``).
    """

    def __init__(
        self,
        ring: KeyRing,
        *,
        state_dir: Path | None,
        executor: BlockingExecutor,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ring = ring
        self._grace: Grace | None = None
        self._clock = clock
        self._old_door_keys: dict[str, bytes] = {}
        self._state_dir = state_dir
        self._executor = executor
        self._door_master: tuple[KeyRing, bytes] | None = None
        self._door_keys: dict[str, bytes] = {}  # by receiving session: one HMAC per session, not per seal
        # Two rotations at once would each write a key file and race to install theirs: the
        # one in memory could then differ from the one on disk. One at a time.
        self._rotating = asyncio.Lock()

    @property
    def ring(self) -> KeyRing:
        return self._ring

    @property
    def previous(self) -> Grace | None:
        """The replaced ring while its grace lasts (None: no grace, or it is over)."""
        grace = self._grace
        if grace is not None and self._clock() >= grace.until:
            self._grace, self._old_door_keys = None, {}
            return None
        return grace

    def rings(self) -> tuple[KeyRing, ...]:
        """Every ring a token may verify under now: the one in force, then a replaced one in its grace."""
        grace = self.previous
        return (self._ring,) if grace is None else (self._ring, grace.ring)

    @property
    def persisted(self) -> bool:
        """Whether the key is kept in ``state_dir/master.key`` (False: memory only)."""
        return self._state_dir is not None

    async def load(self) -> None:
        """Start-up: load the key file, creating it if absent (:class:`KeyFileError` if unusable)."""
        if self._state_dir is not None:
            self._ring = await self._executor.run(KeyRing.load_or_create, self._state_dir)

    async def rotate(self, grace_secs: float = 0.0, sessions: Iterable[str] = ()) -> tuple[KeyRing, KeyRing]:
        """Replace the master key (on disk too unless ephemeral); answers (old ring, new ring).

        With ``grace_secs`` the old ring keeps verifying for that long (never minting), and the
        door keys of ``sessions`` (those registered before the rotation) stay the old ring's.
        A rotation during another's grace ends that grace: only the latest replaced ring verifies."""
        async with self._rotating:
            old = self._ring
            if self._state_dir is None:
                ring = KeyRing.ephemeral()
            else:
                ring = await self._executor.run(KeyRing.rotate, self._state_dir)
            self._ring = ring
            self._old_door_keys = {}
            self._grace = Grace(old, self._clock() + grace_secs, frozenset(sessions)) if grace_secs > 0 else None
            return old, ring

    def door_key_for(self, session_id: str) -> bytes:
        """The key a registered session's door checks the relay's seals with (docs/security.md):
        during a rotation's grace, a session registered before it keeps the old ring's."""
        grace = self._grace
        if grace is not None and session_id in grace.sessions and self.previous is not None:
            key = self._old_door_keys.get(session_id)
            if key is None:
                key = self._old_door_keys[session_id] = seal.door_key(grace.ring.subkey("door-seal"), session_id)
            return key
        ring = self._ring
        cached = self._door_master
        if cached is None or cached[0] is not ring:
            cached = (ring, ring.subkey("door-seal"))
            self._door_master = cached
            self._door_keys = {}  # derived under the ring in force only: a rotation drops them all
        key = self._door_keys.get(session_id)
        if key is None:
            if len(self._door_keys) >= _DOOR_KEY_CACHE_MAX:
                self._door_keys.clear()
            key = self._door_keys[session_id] = seal.door_key(cached[1], session_id)
        return key


def _read_key(path: Path) -> bytes:
    """Read and check an existing key file; ``FileNotFoundError`` if there is none."""
    st = os.lstat(path)  # raises FileNotFoundError for the caller
    if stat.S_ISLNK(st.st_mode):
        raise KeyFileError(
            f"the key file {path} is a symlink; replace it with a regular file (or remove it to "
            "create a new key, which revokes every outstanding token)"
        )
    if not stat.S_ISREG(st.st_mode):
        raise KeyFileError(f"the key file {path} is not a regular file; remove it to create a new key")
    if st.st_mode & 0o077:
        raise KeyFileError(
            f"the key file {path} has mode {stat.S_IMODE(st.st_mode):04o} and is open to group or "
            f"others; run 'chmod 600 {path}'"
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise KeyFileError(f"the key file {path} cannot be opened: {exc.strerror}") from None
    try:
        fst = os.fstat(fd)  # re-check on the descriptor: the path may have changed since lstat
        if not stat.S_ISREG(fst.st_mode) or fst.st_mode & 0o077:
            raise KeyFileError(f"the key file {path} changed while being read; check it and retry")
        data = os.read(fd, KEY_LEN + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_LEN:
        raise KeyFileError(
            f"the key file {path} holds {len(data) if len(data) <= KEY_LEN else 'more than 32'} bytes, "
            f"not {KEY_LEN}; remove it to create a new key (which revokes every outstanding token)"
        )
    return data

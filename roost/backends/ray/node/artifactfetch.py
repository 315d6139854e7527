"""Fetch a capsule artifact from the daemon by sha256, verify it, and cache it: a node keeper's side.

``fetch_artifact(url, sha256, cache_dir, token=..., ca=...)`` answers the path of
``<cache_dir>/<sha256>.mur.zip``, a file whose bytes hash to ``sha256``:

* a cached copy is reused when this process verified or placed that very file (same device,
  inode, size, mtime and ctime); any other copy is re-hashed first, and one that does not match
  is removed and fetched again;
* otherwise ``GET <url>/artifacts/<sha256>`` (keeper token as ``authorization: Bearer``) is
  streamed into a private temporary file in ``cache_dir``, hashed on the way, and only a match
  is fsynced and renamed into place (atomic); a mismatch leaves nothing behind.

Blocking (stdlib ``urllib`` and ``ssl``: a keeper needs no event loop for this);
:func:`fetch_artifact` runs it on a thread for asyncio callers. TLS verifies against the system
store plus ``ca`` (else ``$MURMUR_ROOST_CA``). Every failure is :class:`ArtifactFetchError` with
one sentence, never the token. docs/operations.md, "Network".
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import ssl
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Final

from roost.system.tlsclient import TrustError, context_for, untrusted_sentence

__all__ = ["ArtifactFetchError", "cached_path", "fetch_artifact", "fetch_artifact_blocking"]

_SHA256_RE: Final = re.compile(r"[0-9a-f]{64}")
_CHUNK: Final = 256 * 1024
_FileId = tuple[int, int, int, int, int]
_verified: dict[str, _FileId] = {}
_verified_lock = threading.Lock()


class ArtifactFetchError(RuntimeError):
    """The artifact could not be fetched or did not verify; the message is one sentence."""


def cached_path(cache_dir: str | os.PathLike[str], sha256: str) -> Path:
    return Path(cache_dir) / f"{sha256}.mur.zip"


def _file_id(st: os.stat_result) -> _FileId:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _hash_file(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _reuse(dest: Path, sha256: str) -> bool:
    """Whether ``dest`` is a verified copy (re-hashed unless this process already vouched for it)."""
    try:
        st = dest.lstat()
    except FileNotFoundError:
        return False
    key = os.fspath(dest)
    with _verified_lock:
        if _verified.get(key) == _file_id(st):
            return True
    if _hash_file(dest) == sha256 and _file_id(dest.lstat()) == _file_id(st):
        with _verified_lock:
            _verified[key] = _file_id(st)
        return True
    with contextlib.suppress(OSError):
        dest.unlink()
    return False


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """The daemon never redirects; following one would carry the keeper token elsewhere."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _opener(tls: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    """No proxy from the environment (the token goes to the daemon only), no redirects."""
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({}), _NoRedirect()]
    if tls is not None:
        handlers.append(urllib.request.HTTPSHandler(context=tls))
    return urllib.request.build_opener(*handlers)


def _refusal(url: str, sha256: str, status: int, body: bytes) -> ArtifactFetchError:
    sentence = ""
    with contextlib.suppress(ValueError, AttributeError):
        sentence = str(json.loads(body).get("error") or "")
    said = f": {sentence}" if sentence else ""
    return ArtifactFetchError(f"mur-roost at {url} answered HTTP {status} for the artifact {sha256[:12]}…{said}")


def fetch_artifact_blocking(
    url: str,
    sha256: str,
    cache_dir: str | os.PathLike[str],
    *,
    token: str,
    ca: str | os.PathLike[str] | None = None,
    timeout_secs: float = 300.0,
) -> Path:
    """Blocking :func:`fetch_artifact`."""
    if not _SHA256_RE.fullmatch(sha256):
        raise ArtifactFetchError("the artifact id must be a sha256: 64 lowercase hex digits")
    base = url.rstrip("/")
    cache = Path(cache_dir)
    dest = cached_path(cache, sha256)
    if _reuse(dest, sha256):
        return dest
    try:
        tls = context_for(base, ca)
    except TrustError as exc:
        raise ArtifactFetchError(str(exc)) from None
    try:
        cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise ArtifactFetchError(f"cannot use the artifact cache {cache}: {exc.strerror or exc}") from None
    request = urllib.request.Request(
        f"{base}/artifacts/{sha256}", headers={"authorization": f"Bearer {token}", "accept-encoding": "identity"}
    )
    fd, tmp_name = tempfile.mkstemp(prefix=f".{sha256[:16]}.", suffix=".part", dir=cache)
    tmp = Path(tmp_name)
    placed = False
    try:
        digest = hashlib.sha256()
        try:
            with _opener(tls).open(request, timeout=timeout_secs) as resp, os.fdopen(fd, "wb") as out:
                while chunk := resp.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
        except urllib.error.HTTPError as exc:
            raise _refusal(base, sha256, exc.code, exc.read()) from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = untrusted_sentence(exc, base) or str(getattr(exc, "reason", None) or exc) or type(exc).__name__
            raise ArtifactFetchError(
                f"could not fetch the artifact {sha256[:12]}… from mur-roost at {base}: {reason}"
            ) from None
        got = digest.hexdigest()
        if got != sha256:
            raise ArtifactFetchError(
                f"the artifact fetched from mur-roost at {base} hashes to {got[:12]}…, not {sha256[:12]}…; "
                "nothing was cached"
            )
        os.replace(tmp, dest)
        placed = True
        dir_fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        with _verified_lock:
            _verified[os.fspath(dest)] = _file_id(dest.lstat())
        return dest
    finally:
        if not placed:
            with contextlib.suppress(OSError):
                tmp.unlink()


async def fetch_artifact(
    url: str,
    sha256: str,
    cache_dir: str | os.PathLike[str],
    *,
    token: str,
    ca: str | os.PathLike[str] | None = None,
    timeout_secs: float = 300.0,
) -> Path:
    """Fetch (or reuse) the verified artifact ``sha256`` from the daemon at ``url``; its cached path."""
    return await asyncio.to_thread(
        fetch_artifact_blocking, url, sha256, cache_dir, token=token, ca=ca, timeout_secs=timeout_secs
    )

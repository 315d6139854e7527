"""A node keeper's artifact cache: a registry layout (``<root>/registry/<name>/<version>``).

Why its own module: nodes share no filesystem, so each keeper holds the artifacts its children
run, laid out exactly as the capsule host resolves them (``MURMUR_REGISTRY_PATH``); these are
the blocking file functions behind the keeper's ``has_artifact`` / ``put_artifact`` /
``fetch_artifact`` (roost/backends/ray/node/keeper.py runs them on a worker thread). Every digest is
checked before bytes are placed, so a cache entry is always the sha256 the daemon resolved.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path

from roost.state.registry.layout import artifact_filename, check_coordinates, sidecar_filename
from roost.system.fsutil import write_atomic

__all__ = ["cache_status", "check_sha", "has_artifact", "place_artifact", "put_artifact"]

_SHA256_HEX = frozenset("0123456789abcdef")


def check_sha(sha256: str) -> str:
    """``sha256`` when it is a lowercase hex sha256 digest, else ValueError."""
    if len(sha256) != 64 or not set(sha256) <= _SHA256_HEX:
        raise ValueError("not a sha256 digest")
    return sha256


def _artifact_dir(cache: Path, name: str, version: str) -> Path:
    check_coordinates(name, version)
    return cache / name / version


def _digest(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def has_artifact(cache: Path, name: str, version: str, sha256: str) -> bool:
    """Whether the cache holds ``name@version`` with exactly this digest."""
    path = _artifact_dir(cache, name, version) / artifact_filename(name, version)
    return _digest(path) == check_sha(sha256)


def put_artifact(cache: Path, name: str, version: str, sha256: str, data: bytes) -> None:
    """Cache an artifact's bytes after checking they are ``sha256``."""
    if hashlib.sha256(data).hexdigest() != check_sha(sha256):
        raise ValueError(f"the artifact {name}@{version} fetched from the daemon does not match its sha256")
    directory = _artifact_dir(cache, name, version)
    directory.mkdir(parents=True, exist_ok=True, mode=0o755)
    write_atomic(directory / artifact_filename(name, version), data, mode=0o644)
    write_atomic(directory / sidecar_filename(name, version), (sha256 + "\n").encode(), mode=0o644)


def place_artifact(cache: Path, name: str, version: str, sha256: str, blob: Path) -> None:
    """Put a verified blob at its registry place (a hard link, else a copy), with its sidecar."""
    directory = _artifact_dir(cache, name, version)
    directory.mkdir(parents=True, exist_ok=True, mode=0o755)
    dest = directory / artifact_filename(name, version)
    tmp = directory / f".{artifact_filename(name, version)}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        os.link(blob, tmp)
    except OSError:
        shutil.copyfile(blob, tmp)
    os.replace(tmp, dest)
    write_atomic(directory / sidecar_filename(name, version), (check_sha(sha256) + "\n").encode(), mode=0o644)


def cache_status(cache: Path) -> dict[str, object]:
    """The cache as ``roostctl doctor`` reports it: how many artifacts and bytes, whether the
    keeper can write there, and which entries no longer match the sha256 recorded beside them
    (a damaged disk or a hand edit; the keeper replaces such an entry at the next launch that
    needs it, since every use checks the digest the daemon resolved)."""
    count, size, mismatched = 0, 0, []
    with contextlib.suppress(OSError):
        for zip_path in sorted(cache.glob("*/*/*.mur.zip")):
            count += 1
            with contextlib.suppress(OSError):
                size += zip_path.stat().st_size
            version_dir = zip_path.parent
            sidecar = version_dir / sidecar_filename(version_dir.parent.name, version_dir.name)
            try:
                recorded = sidecar.read_text().strip()
            except OSError:
                recorded = ""
            if _digest(zip_path) != recorded:
                mismatched.append(str(zip_path.relative_to(cache)))
    return {
        "dir": str(cache),
        "count": count,
        "bytes": size,
        "writable": os.access(cache, os.W_OK | os.X_OK),
        "mismatched": mismatched,
    }

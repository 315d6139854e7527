"""A node keeper's artifact cache: a registry layout (``<root>/registry/<name>/<version>``).

Why its own module: nodes share no filesystem, so each keeper holds the artifacts its children
run, laid out exactly as the capsule host resolves them (``MURMUR_REGISTRY_PATH``); these are
the blocking file functions behind the keeper's ``has_artifact`` / ``put_artifact`` /
``fetch_artifact`` (roost/raybackend/nodekeeper.py runs them on a worker thread). Every digest is
checked before bytes are placed, so a cache entry is always the sha256 the daemon resolved.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path

from roost.fsutil import write_atomic
from roost.registry.layout import artifact_filename, check_coordinates, sidecar_filename

__all__ = ["cached_artifacts", "check_sha", "has_artifact", "place_artifact", "put_artifact"]

_SHA256_HEX = frozenset("0123456789abcdef")


def check_sha(sha256: str) -> str:
    """``sha256`` when it is a lowercase hex sha256 digest, else ValueError."""
    if len(sha256) != 64 or not set(sha256) <= _SHA256_HEX:
        raise ValueError("not a sha256 digest")
    return sha256


def _artifact_dir(cache: Path, name: str, version: str) -> Path:
    check_coordinates(name, version)
    return cache / name / version


def has_artifact(cache: Path, name: str, version: str, sha256: str) -> bool:
    """Whether the cache holds ``name@version`` with exactly this digest."""
    path = _artifact_dir(cache, name, version) / artifact_filename(name, version)
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return False
    return digest.hexdigest() == check_sha(sha256)


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


def cached_artifacts(cache: Path) -> int:
    """How many artifacts the cache holds (for ``roostctl doctor``)."""
    try:
        return sum(1 for _ in cache.glob("*/*/*.mur.zip"))
    except OSError:
        return 0

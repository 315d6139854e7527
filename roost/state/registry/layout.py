"""Where artifacts live in a registry and the pure checks on names, entries and sidecars.

Layout is upstream's, so a real Murmur registry works unchanged::

    <root>/<name>/<version>/<name>-<version>.mur.zip
    <root>/<name>/<version>/<name>-<version>.sha256     (optional; must match when present)

The artifact digest is the sha256 of the zip bytes; ``murmur.yaml`` at the top of the zip is
the manifest. ``name``/``version`` must match the manifest's own patterns *before* any path is
built, so a request can never name ``..`` or a sub-path. Entries with an absolute path, a ``..``
component, a backslash or a NUL are ignored; so are symbolic links and special files. Nothing
here touches the filesystem except :func:`read_member`, which reads an already open zip.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from roost.core.manifest import Manifest
from roost.state.registry.errors import RegistryError

__all__ = [
    "CHUNK",
    "DEFAULT_MAX_EXTRACT_BYTES",
    "DEFAULT_MAX_EXTRACT_ENTRIES",
    "DEFAULT_MAX_MANIFEST_BYTES",
    "DIR_FLAGS",
    "FILE_FLAGS",
    "MANIFEST_NAME",
    "MAX_SIDECAR_BYTES",
    "NAME_RE",
    "VERSION_RE",
    "ZIP_ERRORS",
    "Artifact",
    "ArtifactSummary",
    "CacheInfo",
    "Ceiling",
    "FileKey",
    "Problem",
    "StatKey",
    "artifact_filename",
    "check_coordinates",
    "entry_kind",
    "file_key",
    "human_size",
    "parse_sidecar",
    "read_member",
    "safe_member_parts",
    "shown",
    "sidecar_filename",
]

MANIFEST_NAME = "murmur.yaml"
MiB = 1024 * 1024
DEFAULT_MAX_MANIFEST_BYTES = 1 * MiB
DEFAULT_MAX_EXTRACT_BYTES = 256 * MiB
DEFAULT_MAX_EXTRACT_ENTRIES = 10_000
MAX_SIDECAR_BYTES = 4096
CHUNK = 1024 * 1024

# The same patterns the manifest model enforces for ``name`` and ``version`` (roost.core.manifest);
# kept here too so a request is refused before it reaches the filesystem.
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$")
_HEX64_RE = re.compile(r"^[0-9a-fA-F]{64}$")

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)


@dataclass(frozen=True, slots=True)
class Artifact:
    """A resolved, digest-checked artifact; ``manifest`` is the one inside these exact bytes."""

    name: str
    version: str
    sha256: str
    path: Path
    manifest: Manifest

    @property
    def coordinates(self) -> str:
        return f"{self.name}@{self.version}"


@dataclass(frozen=True, slots=True)
class ArtifactSummary:
    """One artifact found by walking the root; nothing is hashed or parsed to produce it."""

    name: str
    version: str
    path: Path
    size: int
    sidecar_sha256: str | None


@dataclass(frozen=True, slots=True)
class Problem:
    """Something ``verify`` found wrong; ``message`` is the sentence a resolve would raise."""

    name: str
    version: str
    path: Path
    message: str


@dataclass(frozen=True, slots=True)
class CacheInfo:
    hits: int
    misses: int
    hashes: int
    entries: int


# The identity of the files a cached resolve was computed from. Any change to either the zip
# or its sidecar (replacement, in-place write, touch) changes at least one of these fields.
FileKey = tuple[int, int, int, int, int]
StatKey = tuple[FileKey, FileKey | None]


def file_key(st: os.stat_result) -> FileKey:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def artifact_filename(name: str, version: str) -> str:
    return f"{name}-{version}.mur.zip"


def sidecar_filename(name: str, version: str) -> str:
    return f"{name}-{version}.sha256"


def shown(value: str) -> str:
    """A caller-supplied string made safe to quote in a one-line message."""
    cleaned = "".join(c if c.isprintable() else "?" for c in value)
    return cleaned if len(cleaned) <= 80 else cleaned[:77] + "..."


def check_coordinates(name: str, version: str) -> None:
    """Refuse coordinates that are not single safe path components, before any path is built."""
    for label, value, pattern, rule in (
        ("name", name, NAME_RE, "lowercase letters, digits, '.', '_' or '-', at most 64"),
        ("version", version, VERSION_RE, "letters, digits, '.', '+', '_' or '-', at most 64"),
    ):
        if not isinstance(value, str) or not value:
            raise RegistryError(shown(str(name)), shown(str(version)), f"the {label} is empty")
        if "/" in value or "\x00" in value or value in (".", "..") or not pattern.match(value):
            raise RegistryError(
                shown(name),
                shown(version),
                f"the {label} is not a safe path component (it must be {rule})",
            )


def safe_member_parts(filename: str) -> tuple[str, ...] | None:
    """The path components of a zip entry name, or ``None`` when the entry must be ignored.

    Ignored: absolute names, any ``..`` component, NUL, backslashes (a Windows separator that
    would mean something else on this host) and names that reduce to nothing.
    """
    if not filename or "\x00" in filename or "\\" in filename or filename.startswith("/"):
        return None
    parts = filename.split("/")
    if ".." in parts:
        return None
    kept = tuple(p for p in parts if p not in ("", "."))
    return kept or None


def entry_kind(info: zipfile.ZipInfo) -> str:
    """``dir``, ``file`` or ``other`` (links, devices, fifos) from the entry's unix mode."""
    if info.is_dir():
        return "dir"
    mode = info.external_attr >> 16
    # No file type at all (only permission bits, as zipfile.writestr writes) is a regular file.
    if stat.S_IFMT(mode) == 0 or stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "other"


def parse_sidecar(raw: bytes) -> str | None:
    """The hex digest of a ``sha256sum``-style line, lowercased; ``None`` when malformed."""
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    words = text.split(None, 1)
    if not words or not _HEX64_RE.match(words[0]):
        return None
    return words[0].lower()


class Ceiling(Exception):
    pass


def read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> Iterator[bytes]:
    """Yield an entry's decompressed bytes, raising :class:`Ceiling` past ``limit`` actual bytes."""
    seen = 0
    with zf.open(info) as fh:
        while True:
            chunk = fh.read(min(CHUNK, limit - seen + 1))
            if not chunk:
                return
            seen += len(chunk)
            if seen > limit:
                raise Ceiling
            yield chunk


def human_size(n: int) -> str:
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n} bytes"


# Everything the zip module and zlib raise on a damaged, truncated, encrypted or unsupported zip.
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError, ValueError)

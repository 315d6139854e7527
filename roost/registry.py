"""The local capsule registry: resolve ``name/version`` to a verified artifact and its manifest.

Layout is upstream's, so a real Murmur registry works unchanged::

    <root>/<name>/<version>/<name>-<version>.mur.zip
    <root>/<name>/<version>/<name>-<version>.sha256     (optional; must match when present)

The artifact digest is the sha256 of the zip bytes; ``murmur.yaml`` at the top of the zip is
the manifest. The referee resolves on every ``POST /spawn``, so a resolve is cached on the
file's identity (device, inode, size, mtime_ns, ctime_ns — and the sidecar's) and an unchanged
zip is never re-hashed; any replacement (``os.replace`` gives a new inode, an in-place write
moves ``ctime``) misses the cache and is read again.

Hardening, because a registry directory may be writable by people who are not the operator:

* ``name``/``version`` must match the manifest's own patterns *before* any path is built, so a
  request can never name ``..`` or a sub-path.
* Every component below the root is opened with ``O_NOFOLLOW`` relative to its parent's
  descriptor: the registry follows no symbolic link, so nothing outside the root is reachable
  and there is no check-then-open race. (The root itself may be a link; the operator chose it.)
* The manifest is read through a ceiling counted on the bytes actually decompressed, never the
  sizes the zip headers declare; extraction has a total-bytes and an entry-count ceiling.
* Entries with an absolute path, a ``..`` component, a backslash or a NUL are ignored; so are
  symbolic links and special files. Extraction writes regular files and directories only,
  through descriptors, and never through a link that already exists in the destination.

Every method here is blocking; the daemon calls them through :class:`roost.blocking.BlockingExecutor`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
import threading
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, ClassVar

from roost.errors import Internal
from roost.manifest import Manifest, ManifestError, parse_manifest

__all__ = [
    "MANIFEST_NAME",
    "Artifact",
    "ArtifactNotFound",
    "ArtifactSummary",
    "CacheInfo",
    "ManifestExtractionError",
    "ManifestParseError",
    "Problem",
    "Registry",
    "RegistryError",
    "artifact_filename",
    "check_coordinates",
    "safe_member_parts",
    "sidecar_filename",
]

MANIFEST_NAME = "murmur.yaml"
MiB = 1024 * 1024
DEFAULT_MAX_MANIFEST_BYTES = 1 * MiB
DEFAULT_MAX_EXTRACT_BYTES = 256 * MiB
DEFAULT_MAX_EXTRACT_ENTRIES = 10_000
_MAX_SIDECAR_BYTES = 4096
_CHUNK = 1024 * 1024

# The same patterns the manifest model enforces for ``name`` and ``version`` (roost.manifest);
# kept here too so a request is refused before it reaches the filesystem.
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$")
_HEX64_RE = re.compile(r"^[0-9a-fA-F]{64}$")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class RegistryError(Internal):
    """An artifact that cannot be resolved or unpacked; ``str()`` is upstream's 500 sentence.

    The subclasses only change the sentence's template, so the HTTP edge maps the whole tree
    to one status (500) and answers with ``str(exc)`` verbatim.
    """

    template: ClassVar[str] = "registry error for '{name}/{version}': {reason}"

    def __init__(self, name: str, version: str, reason: str) -> None:
        super().__init__(self.template.format(name=name, version=version, reason=reason))
        self.name = name
        self.version = version
        self.reason = reason

    def clone(self) -> RegistryError:
        """A fresh instance with the same sentence, for re-raising a cached failure."""
        return type(self)(self.name, self.version, self.reason)


class ArtifactNotFound(RegistryError):
    """Nothing is published at the coordinates (still upstream's ``registry error`` sentence)."""


class ManifestExtractionError(RegistryError):
    """``murmur.yaml`` could not be read out of the artifact (missing, too large, corrupt)."""

    template = "manifest extraction failed: {reason}"


class ManifestParseError(RegistryError):
    """``murmur.yaml`` was read but is not a valid manifest."""

    template = "manifest parse error: {reason}"


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


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
_FileKey = tuple[int, int, int, int, int]
_StatKey = tuple[_FileKey, _FileKey | None]


def _file_key(st: os.stat_result) -> _FileKey:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(slots=True)
class _CacheEntry:
    key: _StatKey
    artifact: Artifact | None
    error: RegistryError | None


# --------------------------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------------------------


def artifact_filename(name: str, version: str) -> str:
    return f"{name}-{version}.mur.zip"


def sidecar_filename(name: str, version: str) -> str:
    return f"{name}-{version}.sha256"


def _shown(value: str) -> str:
    """A caller-supplied string made safe to quote in a one-line message."""
    cleaned = "".join(c if c.isprintable() else "?" for c in value)
    return cleaned if len(cleaned) <= 80 else cleaned[:77] + "..."


def check_coordinates(name: str, version: str) -> None:
    """Refuse coordinates that are not single safe path components, before any path is built."""
    for label, value, pattern, rule in (
        ("name", name, _NAME_RE, "lowercase letters, digits, '.', '_' or '-', at most 64"),
        ("version", version, _VERSION_RE, "letters, digits, '.', '+', '_' or '-', at most 64"),
    ):
        if not isinstance(value, str) or not value:
            raise RegistryError(_shown(str(name)), _shown(str(version)), f"the {label} is empty")
        if "/" in value or "\x00" in value or value in (".", "..") or not pattern.match(value):
            raise RegistryError(
                _shown(name),
                _shown(version),
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


def _entry_kind(info: zipfile.ZipInfo) -> str:
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


def _parse_sidecar(raw: bytes) -> str | None:
    """The hex digest of a ``sha256sum``-style line, lowercased; ``None`` when malformed."""
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    words = text.split(None, 1)
    if not words or not _HEX64_RE.match(words[0]):
        return None
    return words[0].lower()


class _Ceiling(Exception):
    pass


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> Iterator[bytes]:
    """Yield an entry's decompressed bytes, raising :class:`_Ceiling` past ``limit`` actual bytes."""
    seen = 0
    with zf.open(info) as fh:
        while True:
            chunk = fh.read(min(_CHUNK, limit - seen + 1))
            if not chunk:
                return
            seen += len(chunk)
            if seen > limit:
                raise _Ceiling
            yield chunk


def _human(n: int) -> str:
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n} bytes"


# Everything the zip module and zlib raise on a damaged, truncated, encrypted or unsupported zip.
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError, ValueError)


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


class Registry:
    """A read-only view of one registry directory; safe to share between executor threads."""

    def __init__(
        self,
        root: Path,
        *,
        max_manifest_bytes: int = DEFAULT_MAX_MANIFEST_BYTES,
        max_extract_bytes: int = DEFAULT_MAX_EXTRACT_BYTES,
        max_extract_entries: int = DEFAULT_MAX_EXTRACT_ENTRIES,
    ) -> None:
        if max_manifest_bytes <= 0 or max_extract_bytes <= 0 or max_extract_entries <= 0:
            raise ValueError("registry ceilings must be greater than zero")
        self.root = Path(root)
        self._root_str = os.fspath(self.root)
        self.max_manifest_bytes = max_manifest_bytes
        self.max_extract_bytes = max_extract_bytes
        self.max_extract_entries = max_extract_entries
        self._cache: dict[tuple[str, str], _CacheEntry] = {}
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._hashes = 0

    # -- paths and descriptors ---------------------------------------------------------------

    def _path(self, name: str, version: str) -> Path:
        # Built only when needed (a miss or an error): pathlib costs more than the cached resolve.
        return self.root / name / version / artifact_filename(name, version)

    @contextlib.contextmanager
    def _version_dir(self, name: str, version: str) -> Iterator[int]:
        """A descriptor on ``<root>/<name>/<version>``, opened without following any link."""
        fds: list[int] = []
        try:
            try:
                fds.append(os.open(self._root_str, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
                fds.append(os.open(name, _DIR_FLAGS, dir_fd=fds[-1]))
                fds.append(os.open(version, _DIR_FLAGS, dir_fd=fds[-1]))
            except FileNotFoundError:
                raise ArtifactNotFound(name, version, f"no artifact at {self._path(name, version)}") from None
            except NotADirectoryError:
                # O_NOFOLLOW|O_DIRECTORY on a symlink reports ENOTDIR on some kernels, ELOOP on others.
                raise RegistryError(
                    name,
                    version,
                    f"{self._path(name, version).parent} is not a directory (the registry follows no links)",
                ) from None
            except OSError as exc:
                raise self._os_error(name, version, self._path(name, version).parent, exc) from None
            yield fds[-1]
        finally:
            for fd in reversed(fds):
                os.close(fd)

    def _os_error(self, name: str, version: str, path: Path, exc: OSError) -> RegistryError:
        if exc.errno == errno.ELOOP:
            return RegistryError(name, version, f"{path} is a symbolic link, which the registry never follows")
        return RegistryError(name, version, f"cannot open {path}: {exc.strerror or exc}")

    def _open_file(self, dir_fd: int, filename: str, name: str, version: str, path: Path) -> int:
        try:
            fd = os.open(filename, _FILE_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            raise ArtifactNotFound(name, version, f"no artifact at {path}") from None
        except OSError as exc:
            raise self._os_error(name, version, path, exc) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise RegistryError(name, version, f"{path} is not a regular file")
        return fd

    def _sidecar_stat(self, dir_fd: int, name: str, version: str) -> os.stat_result | None:
        try:
            return os.stat(sidecar_filename(name, version), dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RegistryError(name, version, f"cannot read the sha256 sidecar: {exc.strerror or exc}") from None

    # -- resolve -------------------------------------------------------------------------------

    def resolve(self, name: str, version: str) -> Artifact:
        """The verified artifact published at ``name/version``; raises a :class:`RegistryError`.

        Blocking. An unchanged zip (and sidecar) is answered from the cache without hashing.
        """
        return self._resolve(name, version, use_cache=True)

    def _resolve(self, name: str, version: str, *, use_cache: bool) -> Artifact:
        check_coordinates(name, version)
        filename = artifact_filename(name, version)
        with self._version_dir(name, version) as dir_fd:
            try:
                zst = os.stat(filename, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                raise ArtifactNotFound(name, version, f"no artifact at {self._path(name, version)}") from None
            except OSError as exc:
                raise self._os_error(name, version, self._path(name, version), exc) from None
            if not stat.S_ISREG(zst.st_mode):
                path = self._path(name, version)
                if stat.S_ISLNK(zst.st_mode):
                    raise RegistryError(name, version, f"{path} is a symbolic link, which the registry never follows")
                raise RegistryError(name, version, f"{path} is not a regular file")
            sst = self._sidecar_stat(dir_fd, name, version)
            key: _StatKey = (_file_key(zst), None if sst is None else _file_key(sst))
            if use_cache:
                with self._lock:
                    entry = self._cache.get((name, version))
                    if entry is not None and entry.key == key:
                        self._hits += 1
                        if entry.error is not None:
                            raise entry.error.clone()
                        assert entry.artifact is not None
                        return entry.artifact
                    self._misses += 1
            path = self._path(name, version)
            fd = self._open_file(dir_fd, filename, name, version, path)
            with os.fdopen(fd, "rb") as fh:
                opened = _file_key(os.fstat(fh.fileno()))
                try:
                    try:
                        artifact = self._load(fh, name, version, path, dir_fd)
                    except OSError as exc:
                        raise RegistryError(name, version, f"cannot read {path}: {exc.strerror or exc}") from None
                except RegistryError as exc:
                    self._remember(name, version, (opened, key[1]), None, exc)
                    raise
                if _file_key(os.fstat(fh.fileno())) != opened:
                    raise RegistryError(name, version, "the artifact changed while it was being read")
            self._remember(name, version, (opened, key[1]), artifact, None)
            return artifact

    def _remember(
        self, name: str, version: str, key: _StatKey, artifact: Artifact | None, error: RegistryError | None
    ) -> None:
        with self._lock:
            self._cache[(name, version)] = _CacheEntry(key, artifact, error)

    def _hash(self, fh: BinaryIO) -> str:
        with self._lock:
            self._hashes += 1
        fh.seek(0)
        h = hashlib.sha256()
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
        fh.seek(0)
        return h.hexdigest()

    def _load(self, fh: BinaryIO, name: str, version: str, path: Path, dir_fd: int) -> Artifact:
        digest = self._hash(fh)
        self._check_sidecar(dir_fd, name, version, digest)
        manifest = self._read_manifest(fh, name, version)
        if (manifest.name, manifest.version) != (name, version):
            raise RegistryError(
                name,
                version,
                f"the artifact's murmur.yaml declares '{_shown(manifest.name)}@{_shown(manifest.version)}', "
                f"not the coordinates it is published under",
            )
        return Artifact(name=name, version=version, sha256=digest, path=path, manifest=manifest)

    def _check_sidecar(self, dir_fd: int, name: str, version: str, digest: str) -> None:
        filename = sidecar_filename(name, version)
        try:
            fd = os.open(filename, _FILE_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._os_error(name, version, self.root / name / version / filename, exc) from None
        with os.fdopen(fd, "rb") as sf:
            if not stat.S_ISREG(os.fstat(sf.fileno()).st_mode):
                raise RegistryError(name, version, "the sha256 sidecar is not a regular file")
            expected = _parse_sidecar(sf.read(_MAX_SIDECAR_BYTES))
        if expected is None:
            raise RegistryError(name, version, "the sha256 sidecar does not hold a sha256 hex digest")
        if expected != digest:
            raise RegistryError(
                name,
                version,
                f"sha256 sidecar does not match the artifact (sidecar {expected[:12]}…, artifact {digest[:12]}…)",
            )

    def _read_manifest(self, fh: BinaryIO, name: str, version: str) -> Manifest:
        try:
            with zipfile.ZipFile(fh) as zf:
                found = [i for i in zf.infolist() if i.filename == MANIFEST_NAME]
                if not found:
                    raise ManifestExtractionError(
                        name, version, f"'{name}@{version}' has no {MANIFEST_NAME} at the top of its artifact"
                    )
                if len(found) > 1:
                    raise ManifestExtractionError(
                        name, version, f"'{name}@{version}' holds more than one {MANIFEST_NAME}"
                    )
                info = found[0]
                if _entry_kind(info) != "file":
                    raise ManifestExtractionError(
                        name, version, f"'{name}@{version}' has a {MANIFEST_NAME} that is not a regular file"
                    )
                too_big = ManifestExtractionError(
                    name,
                    version,
                    f"the {MANIFEST_NAME} of '{name}@{version}' is larger than the "
                    f"{_human(self.max_manifest_bytes)} ceiling",
                )
                if info.file_size > self.max_manifest_bytes:
                    raise too_big
                try:
                    data = b"".join(_read_member(zf, info, self.max_manifest_bytes))
                except _Ceiling:
                    raise too_big from None
        except _ZIP_ERRORS as exc:
            raise ManifestExtractionError(
                name, version, f"the artifact of '{name}@{version}' is not a readable zip: {exc}"
            ) from None
        try:
            return parse_manifest(data)
        except ManifestError as exc:
            raise ManifestParseError(name, version, f"{MANIFEST_NAME} of '{name}@{version}': {exc}") from None

    # -- extract -------------------------------------------------------------------------------

    def extract(self, artifact: Artifact, dest: Path) -> None:
        """Unpack ``artifact`` into ``dest`` (created 0700 if absent), re-checking its digest.

        Blocking. The zip is re-opened through the same no-follow path and re-hashed, so bytes
        swapped in after :meth:`resolve` are refused rather than run. Only regular files and
        directories are written (dirs 0700, files 0600, or 0700 when the entry is executable);
        ignored entries are listed by :func:`safe_member_parts`. A failure can leave ``dest``
        partly filled; callers unpack into a fresh directory and discard it on error.
        """
        name, version = artifact.name, artifact.version
        check_coordinates(name, version)
        path = self._path(name, version)
        with self._version_dir(name, version) as dir_fd:
            fd = self._open_file(dir_fd, artifact_filename(name, version), name, version, path)
        with os.fdopen(fd, "rb") as fh:
            opened = _file_key(os.fstat(fh.fileno()))
            digest = self._hash(fh)
            if digest != artifact.sha256:
                raise RegistryError(
                    name,
                    version,
                    f"the artifact changed since it was resolved (resolved sha256 {artifact.sha256[:12]}…, "
                    f"now {digest[:12]}…)",
                )
            try:
                with zipfile.ZipFile(fh) as zf:
                    self._extract_zip(zf, name, version, dest)
            except _ZIP_ERRORS as exc:
                raise RegistryError(name, version, f"the artifact is not a readable zip: {exc}") from None
            except OSError as exc:
                # Disk full, permissions, a read error: still one sentence the launcher can report.
                raise RegistryError(name, version, f"cannot unpack into {dest}: {exc.strerror or exc}") from None
            if _file_key(os.fstat(fh.fileno())) != opened:
                raise RegistryError(name, version, "the artifact changed while it was being unpacked")

    def _extract_zip(self, zf: zipfile.ZipFile, name: str, version: str, dest: Path) -> None:
        infos = zf.infolist()
        if len(infos) > self.max_extract_entries:
            raise RegistryError(
                name,
                version,
                f"the artifact has {len(infos)} entries, more than the {self.max_extract_entries} ceiling",
            )
        too_big = RegistryError(
            name,
            version,
            f"the artifact unpacks to more than the {_human(self.max_extract_bytes)} ceiling",
        )
        plan: list[tuple[tuple[str, ...], zipfile.ZipInfo, str]] = []
        declared = 0
        for info in infos:
            parts = safe_member_parts(info.filename)
            kind = _entry_kind(info)
            if parts is None or kind == "other":
                continue
            declared += info.file_size if kind == "file" else 0
            plan.append((parts, info, kind))
        if declared > self.max_extract_bytes:
            raise too_big
        with contextlib.suppress(FileExistsError):
            os.mkdir(dest, 0o700)
        try:
            root_fd = os.open(dest, _DIR_FLAGS)
        except OSError as exc:
            raise RegistryError(name, version, f"cannot open the unpack directory {dest}: {exc.strerror}") from None
        budget = [self.max_extract_bytes]
        try:
            for parts, info, kind in plan:
                if kind == "dir":
                    os.close(self._enter_dirs(root_fd, parts, name, version, dest))
                    continue
                parent_fd = self._enter_dirs(root_fd, parts[:-1], name, version, dest)
                try:
                    executable = bool((info.external_attr >> 16) & 0o111)
                    self._write_file(zf, info, parent_fd, parts, executable, budget, name, version, dest)
                except _Ceiling:
                    raise too_big from None
                finally:
                    os.close(parent_fd)
        finally:
            os.close(root_fd)

    def _enter_dirs(self, root_fd: int, parts: tuple[str, ...], name: str, version: str, dest: Path) -> int:
        """A new descriptor on ``dest/parts...``, creating directories 0700; never via a link."""
        fd = os.dup(root_fd)
        try:
            for i, part in enumerate(parts):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
                try:
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    raise RegistryError(
                        name,
                        version,
                        f"refusing to unpack through '{'/'.join(parts[: i + 1])}' in {dest}, "
                        f"which exists and is not a plain directory",
                    ) from None
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _write_file(
        self,
        zf: zipfile.ZipFile,
        info: zipfile.ZipInfo,
        parent_fd: int,
        parts: tuple[str, ...],
        executable: bool,
        budget: list[int],
        name: str,
        version: str,
        dest: Path,
    ) -> None:
        leaf = parts[-1]
        mode = 0o700 if executable else 0o600
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            out = os.open(leaf, flags, mode, dir_fd=parent_fd)
        except FileExistsError:
            st = os.stat(leaf, dir_fd=parent_fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise RegistryError(
                    name,
                    version,
                    f"refusing to unpack over '{'/'.join(parts)}' in {dest}, which exists and is not a regular file",
                ) from None
            # Replace rather than truncate, so a pre-existing hard link is never written through.
            os.unlink(leaf, dir_fd=parent_fd)
            out = os.open(leaf, flags, mode, dir_fd=parent_fd)
        with os.fdopen(out, "wb") as of:
            for chunk in _read_member(zf, info, budget[0]):
                of.write(chunk)
            budget[0] -= of.tell()
            os.fchmod(of.fileno(), mode)

    # -- listing -------------------------------------------------------------------------------

    def members(self, artifact: Artifact) -> list[str]:
        """The entry names :meth:`extract` would write (files only), sorted."""
        path = self._path(artifact.name, artifact.version)
        with self._version_dir(artifact.name, artifact.version) as dir_fd:
            fd = self._open_file(
                dir_fd,
                artifact_filename(artifact.name, artifact.version),
                artifact.name,
                artifact.version,
                path,
            )
        with os.fdopen(fd, "rb") as fh:
            try:
                with zipfile.ZipFile(fh) as zf:
                    names = {
                        "/".join(parts)
                        for info in zf.infolist()
                        if (parts := safe_member_parts(info.filename)) is not None and _entry_kind(info) == "file"
                    }
            except _ZIP_ERRORS as exc:
                raise RegistryError(
                    artifact.name, artifact.version, f"the artifact is not a readable zip: {exc}"
                ) from None
        return sorted(names)

    def verify(self) -> list[Problem]:
        """Re-read every artifact (bypassing the cache) and report each one that would not resolve.

        Also reports what the walk could not make sense of: directories whose names are not
        safe coordinates, symbolic links, and version directories without their zip.
        """
        summaries, problems = self._walk()
        for s in summaries:
            try:
                self._resolve(s.name, s.version, use_cache=False)
            except RegistryError as exc:
                problems.append(Problem(s.name, s.version, s.path, str(exc)))
        problems.sort(key=lambda p: (p.name, p.version, str(p.path)))
        return problems

    def _walk(self) -> tuple[list[ArtifactSummary], list[Problem]]:
        found: list[ArtifactSummary] = []
        problems: list[Problem] = []
        try:
            names = sorted(os.scandir(self.root), key=lambda e: e.name)
        except FileNotFoundError:
            return found, problems
        for ne in names:
            if ne.name.startswith("."):
                continue
            if ne.is_symlink():
                problems.append(
                    Problem(ne.name, "", Path(ne.path), "a symbolic link, which the registry never follows")
                )
                continue
            if not ne.is_dir(follow_symlinks=False):
                continue
            if not _NAME_RE.match(ne.name):
                problems.append(Problem(_shown(ne.name), "", Path(ne.path), "not a safe capsule name"))
                continue
            for ve in sorted(os.scandir(ne.path), key=lambda e: e.name):
                if ve.name.startswith("."):
                    continue
                if ve.is_symlink():
                    problems.append(
                        Problem(
                            ne.name,
                            ve.name,
                            Path(ve.path),
                            "a symbolic link, which the registry never follows",
                        )
                    )
                    continue
                if not ve.is_dir(follow_symlinks=False):
                    continue
                if not _VERSION_RE.match(ve.name):
                    problems.append(Problem(ne.name, _shown(ve.name), Path(ve.path), "not a safe version"))
                    continue
                zpath = Path(ve.path) / artifact_filename(ne.name, ve.name)
                try:
                    zst = zpath.lstat()
                except FileNotFoundError:
                    problems.append(Problem(ne.name, ve.name, zpath, f"no artifact at {zpath}"))
                    continue
                if not stat.S_ISREG(zst.st_mode):
                    problems.append(Problem(ne.name, ve.name, zpath, f"{zpath} is not a regular file"))
                    continue
                found.append(
                    ArtifactSummary(
                        name=ne.name,
                        version=ve.name,
                        path=zpath,
                        size=zst.st_size,
                        sidecar_sha256=_read_sidecar_quiet(Path(ve.path) / sidecar_filename(ne.name, ve.name)),
                    )
                )
        return found, problems

    # -- cache ---------------------------------------------------------------------------------

    def cache_info(self) -> CacheInfo:
        """Counters for tests and metrics: ``hashes`` counts every full read of a zip."""
        with self._lock:
            return CacheInfo(self._hits, self._misses, self._hashes, len(self._cache))

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    # Last in the class body: a method named ``list`` shadows the builtin for annotations below it.
    def list(self) -> list[ArtifactSummary]:
        """Every artifact under the root, sorted by name then version; nothing is hashed."""
        return self._walk()[0]


def _read_sidecar_quiet(path: Path) -> str | None:
    try:
        fd = os.open(path, _FILE_FLAGS)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return _parse_sidecar(f.read(_MAX_SIDECAR_BYTES))

"""Resolve ``name/version`` to a verified artifact and its manifest (the daemon's side).

The referee resolves on every ``POST /spawn``, so a resolve is cached on the file's identity
(device, inode, size, mtime_ns, ctime_ns — and the sidecar's) and an unchanged zip is never
re-hashed; any replacement (``os.replace`` gives a new inode, an in-place write moves ``ctime``)
misses the cache and is read again. The manifest is read through a ceiling counted on the bytes
actually decompressed, never the sizes the zip headers declare.
"""

from __future__ import annotations

import os
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from roost.core.manifest import Manifest, ManifestError, parse_manifest
from roost.state.registry.base import RegistryBase
from roost.state.registry.errors import ArtifactNotFound, ManifestExtractionError, ManifestParseError, RegistryError
from roost.state.registry.layout import (
    FILE_FLAGS,
    MANIFEST_NAME,
    MAX_SIDECAR_BYTES,
    ZIP_ERRORS,
    Artifact,
    CacheInfo,
    Ceiling,
    StatKey,
    artifact_filename,
    check_coordinates,
    entry_kind,
    file_key,
    human_size,
    parse_sidecar,
    read_member,
    shown,
    sidecar_filename,
)

__all__ = ["Resolver"]


@dataclass(slots=True)
class _CacheEntry:
    key: StatKey
    artifact: Artifact | None
    error: RegistryError | None


class Resolver(RegistryBase):
    """Resolves and caches; safe to share between executor threads."""

    def __init__(self, root: Path, **ceilings: int) -> None:
        """``ceilings``: the keyword-only ceilings :class:`RegistryBase` takes."""
        super().__init__(root, **ceilings)
        self._cache: dict[tuple[str, str], _CacheEntry] = {}
        self._hits = 0
        self._misses = 0

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
            key: StatKey = (file_key(zst), None if sst is None else file_key(sst))
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
                opened = file_key(os.fstat(fh.fileno()))
                try:
                    try:
                        artifact = self._load(fh, name, version, path, dir_fd)
                    except OSError as exc:
                        raise RegistryError(name, version, f"cannot read {path}: {exc.strerror or exc}") from None
                except RegistryError as exc:
                    self._remember(name, version, (opened, key[1]), None, exc)
                    raise
                if file_key(os.fstat(fh.fileno())) != opened:
                    raise RegistryError(name, version, "the artifact changed while it was being read")
            self._remember(name, version, (opened, key[1]), artifact, None)
            return artifact

    def _remember(
        self, name: str, version: str, key: StatKey, artifact: Artifact | None, error: RegistryError | None
    ) -> None:
        with self._lock:
            self._cache[(name, version)] = _CacheEntry(key, artifact, error)

    def _load(self, fh: BinaryIO, name: str, version: str, path: Path, dir_fd: int) -> Artifact:
        digest = self._hash(fh)
        self._check_sidecar(dir_fd, name, version, digest)
        manifest = self._read_manifest(fh, name, version)
        if (manifest.name, manifest.version) != (name, version):
            raise RegistryError(
                name,
                version,
                f"the artifact's murmur.yaml declares '{shown(manifest.name)}@{shown(manifest.version)}', "
                f"not the coordinates it is published under",
            )
        return Artifact(name=name, version=version, sha256=digest, path=path, manifest=manifest)

    def _check_sidecar(self, dir_fd: int, name: str, version: str, digest: str) -> None:
        filename = sidecar_filename(name, version)
        try:
            fd = os.open(filename, FILE_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._os_error(name, version, self.root / name / version / filename, exc) from None
        with os.fdopen(fd, "rb") as sf:
            if not stat.S_ISREG(os.fstat(sf.fileno()).st_mode):
                raise RegistryError(name, version, "the sha256 sidecar is not a regular file")
            expected = parse_sidecar(sf.read(MAX_SIDECAR_BYTES))
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
                if entry_kind(info) != "file":
                    raise ManifestExtractionError(
                        name, version, f"'{name}@{version}' has a {MANIFEST_NAME} that is not a regular file"
                    )
                too_big = ManifestExtractionError(
                    name,
                    version,
                    f"the {MANIFEST_NAME} of '{name}@{version}' is larger than the "
                    f"{human_size(self.max_manifest_bytes)} ceiling",
                )
                if info.file_size > self.max_manifest_bytes:
                    raise too_big
                try:
                    data = b"".join(read_member(zf, info, self.max_manifest_bytes))
                except Ceiling:
                    raise too_big from None
        except ZIP_ERRORS as exc:
            raise ManifestExtractionError(
                name, version, f"the artifact of '{name}@{version}' is not a readable zip: {exc}"
            ) from None
        try:
            return parse_manifest(data)
        except ManifestError as exc:
            raise ManifestParseError(name, version, f"{MANIFEST_NAME} of '{name}@{version}': {exc}") from None

    # -- extract -------------------------------------------------------------------------------
    # -- cache ---------------------------------------------------------------------------------

    def cache_info(self) -> CacheInfo:
        """Counters for tests and metrics: ``hashes`` counts every full read of a zip."""
        with self._lock:
            return CacheInfo(self._hits, self._misses, self._hashes, len(self._cache))

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    # Last in the class body: a method named ``list`` shadows the builtin for annotations below it.

"""Unpack a resolved artifact into a fresh directory (the capsule host's side).

The zip is re-opened through the same no-follow path and re-hashed, so bytes swapped in after a
resolve are refused rather than run. Extraction has a total-bytes and an entry-count ceiling
counted on the bytes actually decompressed, and writes regular files and directories only,
through descriptors, never through a link that already exists in the destination.
"""

from __future__ import annotations

import contextlib
import os
import stat
import zipfile
from pathlib import Path

from roost.state.registry.base import RegistryBase
from roost.state.registry.errors import RegistryError
from roost.state.registry.layout import (
    DIR_FLAGS,
    ZIP_ERRORS,
    Artifact,
    Ceiling,
    artifact_filename,
    check_coordinates,
    entry_kind,
    file_key,
    human_size,
    read_member,
    safe_member_parts,
)

__all__ = ["Extractor"]


class Extractor(RegistryBase):
    """Unpacks and lists what an artifact would unpack to."""

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
            opened = file_key(os.fstat(fh.fileno()))
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
            except ZIP_ERRORS as exc:
                raise RegistryError(name, version, f"the artifact is not a readable zip: {exc}") from None
            except OSError as exc:
                # Disk full, permissions, a read error: still one sentence the launcher can report.
                raise RegistryError(name, version, f"cannot unpack into {dest}: {exc.strerror or exc}") from None
            if file_key(os.fstat(fh.fileno())) != opened:
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
            f"the artifact unpacks to more than the {human_size(self.max_extract_bytes)} ceiling",
        )
        plan: list[tuple[tuple[str, ...], zipfile.ZipInfo, str]] = []
        declared = 0
        for info in infos:
            parts = safe_member_parts(info.filename)
            kind = entry_kind(info)
            if parts is None or kind == "other":
                continue
            declared += info.file_size if kind == "file" else 0
            plan.append((parts, info, kind))
        if declared > self.max_extract_bytes:
            raise too_big
        with contextlib.suppress(FileExistsError):
            os.mkdir(dest, 0o700)
        try:
            root_fd = os.open(dest, DIR_FLAGS)
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
                except Ceiling:
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
                    nfd = os.open(part, DIR_FLAGS, dir_fd=fd)
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
            for chunk in read_member(zf, info, budget[0]):
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
                        if (parts := safe_member_parts(info.filename)) is not None and entry_kind(info) == "file"
                    }
            except ZIP_ERRORS as exc:
                raise RegistryError(
                    artifact.name, artifact.version, f"the artifact is not a readable zip: {exc}"
                ) from None
        return sorted(names)

"""Descriptor access to a registry directory that follows no symbolic link.

A registry directory may be writable by people who are not the operator, so every component
below the root is opened with ``O_NOFOLLOW`` relative to its parent's descriptor: nothing
outside the root is reachable and there is no check-then-open race. (The root itself may be a
link; the operator chose it.) Every method is blocking; the daemon calls them through
:class:`roost.system.blocking.BlockingExecutor`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from roost.state.registry.errors import ArtifactNotFound, RegistryError
from roost.state.registry.layout import (
    CHUNK,
    DEFAULT_MAX_EXTRACT_BYTES,
    DEFAULT_MAX_EXTRACT_ENTRIES,
    DEFAULT_MAX_MANIFEST_BYTES,
    DIR_FLAGS,
    FILE_FLAGS,
    artifact_filename,
    sidecar_filename,
)

__all__ = ["RegistryBase"]


class RegistryBase:
    """One registry directory opened without following links; what every audience shares."""

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
        # Guards the counters here and the resolve cache in roost.state.registry.resolve.
        self._lock = threading.Lock()
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
                fds.append(os.open(name, DIR_FLAGS, dir_fd=fds[-1]))
                fds.append(os.open(version, DIR_FLAGS, dir_fd=fds[-1]))
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
            fd = os.open(filename, FILE_FLAGS, dir_fd=dir_fd)
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

    def _hash(self, fh: BinaryIO) -> str:
        """The sha256 of the whole zip (counted in ``hashes``), leaving ``fh`` at its start."""
        with self._lock:
            self._hashes += 1
        fh.seek(0)
        h = hashlib.sha256()
        while chunk := fh.read(CHUNK):
            h.update(chunk)
        fh.seek(0)
        return h.hexdigest()

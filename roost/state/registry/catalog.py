"""List and verify everything under a registry root (roostctl's side)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from roost.state.registry.errors import RegistryError
from roost.state.registry.layout import (
    FILE_FLAGS,
    MAX_SIDECAR_BYTES,
    NAME_RE,
    VERSION_RE,
    ArtifactSummary,
    Problem,
    artifact_filename,
    parse_sidecar,
    shown,
    sidecar_filename,
)
from roost.state.registry.resolve import Resolver

__all__ = ["Catalog"]


class Catalog(Resolver):
    """Walks the root; :meth:`verify` resolves each artifact found, bypassing the cache."""

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
            if not NAME_RE.match(ne.name):
                problems.append(Problem(shown(ne.name), "", Path(ne.path), "not a safe capsule name"))
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
                if not VERSION_RE.match(ve.name):
                    problems.append(Problem(ne.name, shown(ve.name), Path(ve.path), "not a safe version"))
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

    # Last in the class body: a method named ``list`` shadows the builtin for annotations below it.
    def list(self) -> list[ArtifactSummary]:
        """Every artifact under the root, sorted by name then version; nothing is hashed."""
        return self._walk()[0]


def _read_sidecar_quiet(path: Path) -> str | None:
    try:
        fd = os.open(path, FILE_FLAGS)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return parse_sidecar(f.read(MAX_SIDECAR_BYTES))

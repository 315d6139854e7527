"""Pack a capsule source directory into a registry artifact, deterministically.

The same directory always packs to the same bytes, so the same sha256: entries are sorted,
stamped 1980-01-01 00:00:00, stored with a normalised unix mode (0644, or 0755 when the source
file is executable) and deflated; nothing about the packing host (mtime, owner, umask, walk
order) reaches the zip. That is what lets a checked-in registry be tested against its sources,
and lets an approval's pinned digest survive a rebuild of unchanged sources.

Written with the registry's own rules in mind, so whatever is packed here resolves there:
``murmur.yaml`` is validated, an entrypoint's relative first word with a ``/`` in it must be an
executable file of the capsule (a bare word is one, or a command on ``PATH``, found again at launch),
and the registry's ceilings (manifest size, total size, entry count) are applied.
The zip and its ``.sha256`` sidecar are written atomically (temp file, fsync, ``os.replace``).

CLI: ``python -m roost.state.registry.packing SRC... --registry DIR`` prints ``name@version sha256`` per capsule.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import shutil
import stat
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from roost.core.limits import KNOWN_RESOURCE_FIELDS
from roost.core.manifest import Manifest, ManifestError, parse_manifest
from roost.state.registry.layout import (
    DEFAULT_MAX_EXTRACT_BYTES,
    DEFAULT_MAX_EXTRACT_ENTRIES,
    DEFAULT_MAX_MANIFEST_BYTES,
    MANIFEST_NAME,
    artifact_filename,
    sidecar_filename,
)
from roost.system.fsutil import write_atomic

__all__ = ["FIXED_DATE_TIME", "PackError", "PackResult", "build_zip", "main", "pack_capsule"]

FIXED_DATE_TIME = (1980, 1, 1, 0, 0, 0)
_SKIP_SUFFIXES = (".pyc", ".pyo")
_SKIP_DIRS = frozenset({"__pycache__"})


class PackError(ValueError):
    """A capsule directory that cannot be packed; the message is one sentence naming the cause."""


@dataclass(frozen=True, slots=True)
class PackResult:
    """What was published; ``changed`` is False when identical bytes were already there."""

    name: str
    version: str
    sha256: str
    path: Path
    changed: bool = True

    @property
    def coordinates(self) -> str:
        return f"{self.name}@{self.version}"


def _collect(src_dir: Path) -> list[tuple[str, Path, bool]]:
    """``(arcname, path, executable)`` for every file to pack, sorted by arcname.

    Dotfiles, ``__pycache__`` and compiled Python are skipped (build noise that would make two
    checkouts pack differently). Symbolic links and special files are refused: following a
    link could pack something from outside the capsule, and dropping it silently would ship a
    capsule that differs from its source.
    """
    files: list[tuple[str, Path, bool]] = []
    for dirpath, dirnames, filenames in os.walk(src_dir, followlinks=False):
        here = Path(dirpath)
        keep: list[str] = []
        for d in sorted(dirnames):
            if d.startswith(".") or d in _SKIP_DIRS:
                continue
            if (here / d).is_symlink():
                raise PackError(f"{here / d} is a symbolic link; a capsule is packed from regular files only")
            keep.append(d)
        dirnames[:] = keep
        for f in filenames:
            if f.startswith(".") or f.endswith(_SKIP_SUFFIXES):
                continue
            p = here / f
            st = p.lstat()
            if not stat.S_ISREG(st.st_mode):
                raise PackError(f"{p} is not a regular file; a capsule is packed from regular files only")
            arcname = p.relative_to(src_dir).as_posix()
            if "\\" in arcname:
                raise PackError(f"{p} has a backslash in its name, which the registry would ignore")
            files.append((arcname, p, bool(st.st_mode & 0o111)))
    files.sort(key=lambda t: t[0])
    return files


def _zipinfo(arcname: str, executable: bool) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(arcname, date_time=FIXED_DATE_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3  # unix, so external_attr carries the mode on every packing host
    info.external_attr = (stat.S_IFREG | (0o755 if executable else 0o644)) << 16
    return info


def build_zip(files: Sequence[tuple[str, bytes, bool]]) -> bytes:
    """The deterministic zip of ``(arcname, data, executable)`` entries, in the order given."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for arcname, data, executable in files:
            zf.writestr(_zipinfo(arcname, executable), data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    return buf.getvalue()


def _check_entrypoint(manifest: Manifest, src_dir: Path, arcnames: set[str]) -> None:
    if not manifest.entrypoint:
        return
    first = manifest.entrypoint[0]
    if first.startswith("/"):
        return
    parts = [p for p in first.split("/") if p not in ("", ".")]
    if ".." in parts or not parts:
        raise PackError(f"entrypoint '{first}' must name a file inside the capsule directory")
    rel = "/".join(parts)
    if rel not in arcnames and "/" not in first and shutil.which(first) is not None:
        return  # a command the host finds on PATH at launch (``python3 -c …``; roost/capsule/entrypoint.py)
    if rel not in arcnames:
        where = "" if "/" in first else " nor a command on this host's PATH"
        raise PackError(f"entrypoint '{first}' is not a file of the capsule directory {src_dir}{where}")
    if not os.stat(src_dir / rel).st_mode & 0o111:
        raise PackError(f"entrypoint '{first}' is not executable; run chmod +x on it before packing")


def _load_manifest(src_dir: Path) -> Manifest:
    mpath = src_dir / MANIFEST_NAME
    try:
        st = mpath.lstat()
    except FileNotFoundError:
        raise PackError(f"{src_dir} has no {MANIFEST_NAME}") from None
    if not stat.S_ISREG(st.st_mode):
        raise PackError(f"{mpath} is not a regular file")
    if st.st_size > DEFAULT_MAX_MANIFEST_BYTES:
        raise PackError(f"{mpath} is larger than the registry's 1 MiB manifest ceiling")
    try:
        manifest = parse_manifest(mpath.read_bytes())
    except ManifestError as exc:
        raise PackError(f"{mpath}: {exc}") from None
    unknown = manifest.capabilities.resources.unknown_keys
    if unknown:
        raise PackError(
            f"{mpath}: capabilities.resources.{unknown[0]} is not a resource limit this daemon knows "
            f"(it knows {', '.join(KNOWN_RESOURCE_FIELDS)}), so it could never be enforced; remove it "
            "or use one of those"
        )
    return manifest


def pack_capsule(src_dir: Path, registry_root: Path) -> PackResult:
    """Pack ``src_dir`` into ``registry_root/<name>/<version>/`` and write its sha256 sidecar.

    Re-packing a changed directory under the same version replaces the artifact (the sidecar is
    removed first, so a concurrent resolve sees either no sidecar or a matching one, never a
    mismatch). Raises :class:`PackError` with one sentence on bad input.
    """
    src_dir = Path(src_dir)
    if not src_dir.is_dir():
        raise PackError(f"{src_dir} is not a directory")
    manifest = _load_manifest(src_dir)
    collected = _collect(src_dir)
    if len(collected) > DEFAULT_MAX_EXTRACT_ENTRIES:
        raise PackError(
            f"{src_dir} holds {len(collected)} files, more than the registry's "
            f"{DEFAULT_MAX_EXTRACT_ENTRIES}-entry ceiling"
        )
    _check_entrypoint(manifest, src_dir, {a for a, _, _ in collected})
    entries: list[tuple[str, bytes, bool]] = []
    total = 0
    for arcname, path, executable in collected:
        data = path.read_bytes()
        total += len(data)
        if total > DEFAULT_MAX_EXTRACT_BYTES:
            raise PackError(f"{src_dir} is larger than the registry's 256 MiB unpack ceiling")
        entries.append((arcname, data, executable))
    blob = build_zip(entries)
    digest = hashlib.sha256(blob).hexdigest()

    name, version = manifest.name, manifest.version
    out_dir = Path(registry_root) / name / version
    out_dir.mkdir(parents=True, exist_ok=True)
    zpath = out_dir / artifact_filename(name, version)
    spath = out_dir / sidecar_filename(name, version)
    sidecar = f"{digest}  {zpath.name}\n".encode()
    try:
        unchanged = zpath.read_bytes() == blob and spath.read_bytes() == sidecar
    except FileNotFoundError:
        unchanged = False
    if unchanged:
        return PackResult(name, version, digest, zpath, changed=False)
    with contextlib.suppress(FileNotFoundError):
        spath.unlink()
    # Artifacts are published for other users (the daemon's service account) to read.
    write_atomic(zpath, blob, mode=0o644)
    write_atomic(spath, sidecar, mode=0o644)
    return PackResult(name, version, digest, zpath, changed=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m roost.state.registry.packing SRC... --registry DIR``; exit 0, or 2 with one sentence."""
    parser = argparse.ArgumentParser(
        prog="python -m roost.state.registry.packing",
        description="Pack capsule directories into a Murmur registry (deterministic .mur.zip + .sha256).",
    )
    parser.add_argument("src", nargs="+", type=Path, help="capsule source directory holding murmur.yaml")
    parser.add_argument("--registry", required=True, type=Path, help="registry root directory")
    args = parser.parse_args(argv)
    for src in args.src:
        try:
            result = pack_capsule(src, args.registry)
        except PackError as exc:
            print(f"{parser.prog}: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"{parser.prog}: cannot pack {src}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"{result.coordinates} {result.sha256}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A capsule archive whose entries carry permission bits but no file type (what Python's own
``zipfile.writestr`` writes: 0600 for a name, or the bits a ``ZipInfo`` was given) is an archive
of regular files: it resolves, runs and finishes like any other."""

from __future__ import annotations

import hashlib
import stat
import zipfile
from pathlib import Path
from typing import Any

from tests.support.daemon import RunningDaemon
from tests.support.launcher import job_final
from tests.support.registry import EXAMPLES, RegistryBuilder


def _typeless_zip(src: Path, registry: RegistryBuilder, name: str, version: str) -> Path:
    out = registry.root / name / version
    out.mkdir(parents=True)
    path = out / f"{name}-{version}.mur.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for file in sorted(p for p in src.rglob("*") if p.is_file()):
            arcname = file.relative_to(src).as_posix()
            if file.stat().st_mode & 0o100:
                info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o755 << 16  # permission bits, no file type
                zf.writestr(info, file.read_bytes())
            else:
                zf.writestr(arcname, file.read_bytes())  # writestr's own: mode 0600, no type
    with zipfile.ZipFile(path) as zf:
        assert all(stat.S_IFMT(i.external_attr >> 16) == 0 for i in zf.infolist())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    (out / f"{name}-{version}.sha256").write_text(f"{digest}  {path.name}\n")
    return path


async def test_a_writestr_archive_registers_and_runs(daemon_factory: Any, registry: RegistryBuilder) -> None:
    _typeless_zip(EXAMPLES / "capsules" / "sleeper", registry, "sleeper", "0.1.0")
    d: RunningDaemon = await daemon_factory(registry.root, spawn_allow=("sleeper",))
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "sleeper", "version": "0.1.0", "task": "sleep 0"})
    assert status == 201, job
    final = await job_final(d, job["job_id"], timeout=60)
    assert (final["state"], final["outcome"]) == ("complete", "ok"), final

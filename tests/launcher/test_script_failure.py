"""A script capsule whose script fails (a non-zero exit, a signal) under any containment class
reports ``error``, and its job reads ``failed``: its session ran and failed, and its host said so.
``crashed`` is only for a child process that ended without recording a completion
(roost/core/finalize.py, rule 5)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from roost.state.registry.packing import pack_capsule
from tests.support.launcher import job_final
from tests.support.registry import EXAMPLES, RegistryBuilder

CRED = "x-murmur-spawn-credential"


@pytest.mark.parametrize("containment", ["advisory", "scoped", "sealed"])
@pytest.mark.parametrize("task", ["boom", "die by signal"])
async def test_a_delegated_script_that_fails_is_an_error(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, parent_door: Any, containment: str, task: str
) -> None:
    src = tmp_path / "src" / "crasher"
    shutil.copytree(EXAMPLES / "capsules" / "crasher", src)
    manifest = yaml.safe_load((src / "murmur.yaml").read_text())
    manifest.setdefault("capabilities", {})["containment"] = containment
    (src / "murmur.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    pack_capsule(src, registry.root)
    registry.add("boss", capabilities={"spawn": {"allow": ["crasher"]}})
    d = await daemon_factory(registry.root, spawn_allow=("boss", "crasher"), stop_grace_secs=1.0)
    door = await parent_door("x")
    wd = tmp_path / "boss"
    wd.mkdir(mode=0o700)
    _sid, cred = await d.register_top("boss", workdir=str(wd), capsule_url=door.url)
    status, body, _, _ = await d.call(
        "POST", "/jobs", json={"name": "crasher", "version": "0.1.0", "task": task}, headers={CRED: cred}
    )
    assert status == 201, body
    final = await job_final(d, body["job_id"], {CRED: cred}, timeout=30)
    assert final["completion"]["status"] == "error", final
    assert final["state"] == "failed" and final["outcome"] == "error", final

"""Children run as their session's uid; top-level launches only from allowed uids.

The attacker is uid 65534 (a child process that dropped to it); the daemon runs as root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from trust.attacker import NOBODY, owned_dir, request_as, system_python

from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.launcher import DOUBLE, job_final, wait_for
from tests.support.registry import EXAMPLES, RegistryBuilder

from .test_launch import start

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching uids needs root")
RUNTIME_ANYONE = (system_python(), str(DOUBLE))


def _uids(pid: int) -> tuple[int, ...]:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("Uid:"):
                return tuple(int(x) for x in line.split()[1:])
    raise AssertionError("no Uid line")


def _gids(pid: int) -> tuple[int, ...]:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("Gid:"):
                return tuple(int(x) for x in line.split()[1:])
    raise AssertionError("no Gid line")


async def test_top_level_launch_needs_an_allowed_uid(
    daemon_factory: Any, registry: RegistryBuilder, scratch: Path
) -> None:
    d = await start(daemon_factory, registry, runtime_command=RUNTIME_ANYONE)
    wd = owned_dir(scratch, "wd", NOBODY)
    status, body = await request_as(
        NOBODY, d.url, "POST", "/jobs", {"name": "solo", "version": "0.1.0", "workdir": str(wd)}
    )
    assert status == 403, body
    assert body == {
        "error": "a top-level job without a credential may be launched only from the admin socket "
        f"or by a local user listed in launch_uids (uid {NOBODY} is not)"
    }
    assert list(wd.iterdir()) == []


async def test_child_runs_as_the_callers_uid(daemon_factory: Any, registry: RegistryBuilder, scratch: Path) -> None:
    d = await start(daemon_factory, registry, runtime_command=RUNTIME_ANYONE, launch_uids=(0, NOBODY))
    root_wd = scratch / "rootwd"
    root_wd.mkdir(mode=0o700)
    status, body = await request_as(
        NOBODY, d.url, "POST", "/jobs", {"name": "solo", "version": "0.1.0", "workdir": str(root_wd)}
    )
    assert status == 403 and body["error"] == f"the workdir {root_wd} belongs to uid 0, not to the calling uid {NOBODY}"
    assert list(root_wd.iterdir()) == []
    wd = owned_dir(scratch, "wd", NOBODY)
    status, body = await request_as(
        NOBODY, d.url, "POST", "/jobs", {"name": "solo", "version": "0.1.0", "workdir": str(wd), "task": "sleep 30"}
    )
    assert status == 201, body
    job_id = body["job_id"]
    job = d.roost.launcher.jobs[job_id]
    assert job.pid is not None and job.uid == NOBODY
    assert _uids(job.pid) == (NOBODY,) * 4
    assert _gids(job.pid) == (NOBODY,) * 4
    rec = d.roost.table.get(body["session_id"])
    assert rec is not None and rec.uid == NOBODY
    # Every file the daemon made for it belongs to it.
    for p in (wd / "input.json", wd / "meta" / "job_id.txt", wd / ".murmur" / "launcher.log"):
        assert p.stat().st_uid == NOBODY, p
    status, body = await request_as(NOBODY, d.url, "POST", f"/jobs/{job_id}/cancel")
    assert status == 200, body
    final = await job_final(d, job_id)
    assert final["state"] == "terminated"


async def test_delegated_child_inherits_the_uid(daemon_factory: Any, registry: RegistryBuilder, scratch: Path) -> None:
    # A self-registered session launches only for a uid in launch_uids (docs/security.md).
    d = await start(daemon_factory, registry, runtime_command=RUNTIME_ANYONE, launch_uids=(0, NOBODY))
    wd = owned_dir(scratch, "boss", NOBODY)
    sid = "ses_" + os.urandom(8).hex()
    status, body = await request_as(
        NOBODY, d.url, "POST", "/register", {"session_id": sid, "name": "boss", "version": "0.1.0", "workdir": str(wd)}
    )
    assert status == 200, body
    cred = {"x-murmur-spawn-credential": body["credential"]}
    status, job, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": "sleep 30"}, headers=cred
    )
    assert status == 201, job
    pid = d.roost.launcher.jobs[job["job_id"]].pid
    assert pid is not None and _uids(pid) == (NOBODY,) * 4
    child = d.roost.table.get(job["session_id"])
    assert child is not None and child.uid == NOBODY and child.parent_id == sid
    child_dir = Path(job["workdir"])
    for p in (wd / ".murmur", wd / ".murmur" / "children", child_dir, child_dir / "input.json"):
        assert p.stat().st_uid == NOBODY, p
    status, body, _, _ = await d.call("POST", f"/jobs/{job['job_id']}/cancel", headers=cred)
    assert status == 200, body
    await job_final(d, job["job_id"], headers=cred)
    with contextlib.suppress(ProcessLookupError):
        await wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 10)


async def test_a_root_daemon_without_setuid_setgid_refuses_another_uid_up_front(
    scratch: Path, daemon_processes: list[DaemonProcess]
) -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to take the capabilities away")
    cfg = scratch / "roost.toml"
    cfg.write_text(
        f'registry_path = "{EXAMPLES / "registry"}"\nstate_dir = "{scratch / "state"}"\n'
        f'spawn_allow = ["worker"]\nlaunch_uids = [0, {NOBODY}]\n'
    )
    # Root, with CAP_SETUID and CAP_SETGID out of its bounding set (so out of its effective set).
    d = start_daemon_process(["--config", str(cfg)], prefix=["setpriv", "--bounding-set=-setuid,-setgid"])
    daemon_processes.append(d)
    wd = owned_dir(scratch, "wd", NOBODY)
    status, body = await request_as(
        NOBODY, d.url, "POST", "/jobs", {"name": "worker", "version": "0.1.0", "workdir": str(wd), "task": "a b"}
    )
    assert status == 409, body
    assert body == {
        "error": f"this daemon runs as root without CAP_SETUID/CAP_SETGID, so it cannot start a child as uid "
        f"{NOBODY} (the session's own); give the daemon those capabilities (systemd: CapabilityBoundingSet= "
        "and AmbientCapabilities= in its unit) or run it as that user"
    }
    assert list(wd.iterdir()) == []  # refused before anything of the job was made
    # Its own uid's jobs still run.
    status, body = await request_as(0, d.url, "POST", "/jobs", {"name": "worker", "version": "0.1.0", "task": "a b"})
    assert status == 201, body
    assert d.stop() == 0

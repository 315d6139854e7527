"""``run_as``: the operator's jobs run as an unprivileged user; the owner stays the operator.

A launch that user cannot run (its interpreter, or a workdir it cannot reach) is refused with one
sentence before anything is made. The daemon runs as root; the user is ``nobody`` (65534).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from trust.attacker import NOBODY, owned_dir, request_as

from tests.support.launcher import wait_for
from tests.support.registry import RegistryBuilder

from .test_launch import start
from .test_run_as import RUNTIME_ANYONE, _uids

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching uids needs root")


def _status(pid: int, key: str) -> str:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return line.split(":", 1)[1].strip()
    raise AssertionError(key)


def _private_interpreter(tmp_path: Path) -> Path:
    """A link to the system Python in a directory only root can enter."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    interp = private / "python"
    interp.symlink_to(Path(RUNTIME_ANYONE[0]).resolve())
    return interp


async def test_operator_jobs_run_as_the_configured_user(
    daemon_factory: Any, registry: RegistryBuilder, scratch: Path
) -> None:
    d = await start(daemon_factory, registry, runtime_command=RUNTIME_ANYONE, run_as="nobody")
    wd = owned_dir(scratch, "wd", NOBODY)
    status, job, _, _ = await d.call(
        "POST", "/jobs", json={"name": "solo", "version": "0.1.0", "workdir": str(wd), "task": "sleep 30"}
    )
    assert status == 201, job
    rec = d.roost.launcher.jobs[job["job_id"]]
    assert rec.pid is not None and rec.uid == 0 and rec.run_uid == NOBODY
    assert _uids(rec.pid) == (NOBODY,) * 4
    assert int(_status(rec.pid, "CapEff"), 16) == 0 and _status(rec.pid, "NoNewPrivs") == "1"
    # The owner is still the operator: root sees and cancels it, the run_as user does not.
    assert (await request_as(NOBODY, d.url, "GET", f"/jobs/{job['job_id']}"))[0] == 404
    assert (await d.call("POST", f"/jobs/{job['job_id']}/cancel"))[0] == 200
    await wait_for(lambda: rec.final, 20)


async def test_a_launch_the_user_cannot_run_is_refused_with_a_sentence(
    daemon_factory: Any, registry: RegistryBuilder, scratch: Path, tmp_path: Path
) -> None:
    # The job directory under the daemon's 0700 state dir: nobody cannot reach it.
    d = await start(daemon_factory, registry, runtime_command=RUNTIME_ANYONE, run_as="nobody")
    status, body, _, _ = await d.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0", "task": "x"})
    assert status == 409, body
    assert body["error"].startswith("run_as: the job would run as nobody (uid 65534), but uid 65534 cannot reach")
    assert "workdir" in body["error"] and not d.roost.launcher.jobs
    # An interpreter the user cannot execute (this test's own, under a private directory).
    interp = _private_interpreter(tmp_path)
    d2 = await start(
        daemon_factory,
        registry,
        runtime_command=(str(interp), RUNTIME_ANYONE[1]),
        run_as="nobody",
        state_dir=tmp_path / "state2",
    )
    wd = owned_dir(scratch, "wd", NOBODY)
    status, body, _, _ = await d2.call(
        "POST", "/jobs", json={"name": "solo", "version": "0.1.0", "workdir": str(wd), "task": "x"}
    )
    assert status == 409 and "interpreter" in body["error"], body
    status, body, _, _ = await d2.call(
        "POST", "/jobs", json={"name": "solo", "version": "0.1.0", "workdir": str(scratch), "task": "x"}
    )
    assert status == 403 and "belongs to uid 0, not to the calling uid 65534" in body["error"], body
    # An unknown user is one sentence too.
    d3 = await start(daemon_factory, registry, run_as="no-such-user-x", state_dir=tmp_path / "state3")
    status, body, _, _ = await d3.call("POST", "/jobs", json={"name": "solo", "version": "0.1.0"})
    assert (status, body) == (
        409,
        {"error": "run_as names the user 'no-such-user-x', which does not exist on this host"},
    )

"""The local process backend on its own: real children, a real keeper, real files.

What the launcher relies on from any :class:`roost.backends.base.ProcessBackend`, checked
against the one that runs children on this host: the child directory's records, a child's
stdin/stdout/stderr, its lifeline, its exit status, stopping its group, finishing off what it
left, and finding it again as another daemon instance would.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from roost.backends.base import (
    CannotRunAs,
    ChildDir,
    ChildDirError,
    ChildHandle,
    ProcessBackend,
    StartFailed,
    StartSpec,
)
from roost.backends.local.backend import LocalBackend
from roost.backends.local.holder import holder_address
from roost.backends.local.lifeline import HolderClient
from roost.core import ids
from roost.core.manifest import ResourceCaps
from roost.services.completionfile import CompletionRecord
from roost.system.blocking import BlockingExecutor

# Reads its stdin (the approval line) and its lifeline; says both on stdout, one line each;
# then writes to stderr and waits until its lifeline closes (EOF), exiting 7, or for a signal.
CHILD = r"""
import os, sys
line = sys.stdin.readline().strip()
print(json.dumps({"stdin": line, "cwd": os.getcwd()}), flush=True)
print("x" * (70 * 1024), flush=True)
print("after", flush=True)
sys.stderr.write("err one\nerr two\n"); sys.stderr.flush()
fd = int(os.environ["MURMUR_SPAWNER_LIFELINE"])
while os.read(fd, 1):
    pass
sys.exit(7)
"""


def _start_ticks(pid: int) -> int:
    """The kernel's start of ``pid`` in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rfind(b")") + 2 :].split()[19])


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    executor = BlockingExecutor()
    local = LocalBackend(executor, state_dir=tmp_path / "state", job_cgroups="off", max_starting=0)
    await local.open()
    try:
        yield local
    finally:
        await local.close()
        executor.shutdown()


def _spec(tmp_path: Path, child_dir: ChildDir, code: str, *, stdin: bytes = b"") -> StartSpec:
    return StartSpec(
        dir=child_dir,
        argv=[sys.executable, "-c", "import json\n" + code],
        env={
            "PATH": os.defpath,
            "MURMUR_JOB_ID": child_dir.job_id,
            # The suite's orphan guard finds children by this path under its temp root.
            "MURMUR_REGISTRY_PATH": str(tmp_path / "registry"),
            "MURMUR_ROOST_INSTANCE": "test-instance",
        },
        cwd=child_dir.workdir,
        stdin=stdin,
        uid=None,
        resources=ResourceCaps(),
        limits_in_child=False,
        capsule="t@0.1.0",
        instance="test-instance",
    )


async def test_the_local_backend_is_a_process_backend(backend: LocalBackend) -> None:
    assert isinstance(backend, ProcessBackend)


async def test_a_child_from_start_to_exit(backend: LocalBackend, tmp_path: Path) -> None:
    job_id = ids.job_id()
    child_dir = ChildDir(job_id, str(tmp_path / "job"), None, None)
    await backend.prepare_dir(child_dir, {"objective": "do it"}, fresh=True)
    assert (tmp_path / "job" / "meta" / "job_id.txt").read_text() == job_id + "\n"
    task = json.loads((tmp_path / "job" / "input.json").read_text())
    assert task["job_id"] == job_id and task["payload"]["objective"] == "do it"

    assert backend.holder is not None and backend.holder.connected  # else no lifeline is listed
    child = await backend.start(_spec(tmp_path, child_dir, CHILD, stdin=b"approval-line\n"))
    assert isinstance(child, ChildHandle)
    assert child.pid > 0 and child.alive and child.node is None
    assert child.pid_start == _start_ticks(child.pid)
    first = json.loads(await asyncio.wait_for(child.readline(), 10))
    assert first == {"stdin": "approval-line", "cwd": str(tmp_path / "job")}
    with pytest.raises(ValueError):
        await asyncio.wait_for(child.readline(), 10)  # over 64 KiB
    line = await asyncio.wait_for(child.readline(), 10)
    if line != b"after\n":  # what was still on its way of the long line, as a fragment of x's
        assert set(line.rstrip(b"\n")) <= {ord("x")}
        line = await asyncio.wait_for(child.readline(), 10)
    assert line == b"after\n"
    assert await backend.is_running(child.ref)
    assert child_dir.job_id in await backend.held_lifelines()

    backend.lifeline_close(job_id)  # EOF on the lifeline: the child ends itself
    assert await asyncio.wait_for(child.exited, 10) == "exit status 7"
    assert not child.alive
    assert await child.readline() == b""
    assert await backend.stderr_tail(child_dir) == ["err one", "err two"]
    assert not await backend.is_running(child.ref)
    child.close()
    await backend.finish_off(job_id, child.pid)

    await backend.append_log(child_dir, ["later"])
    assert await backend.stderr_tail(child_dir) == ["err one", "err two"]
    log = (tmp_path / "job" / ".murmur" / "launcher.log").read_text()
    assert log.endswith("stdout: later\n")

    assert await backend.read_completion(child_dir) is None
    rec = CompletionRecord(
        delegation_id=ids.delegation_id(),
        capsule_name="t",
        capsule_version="0.1.0",
        session_id="",
        status="crashed",
        workdir=child_dir.workdir,
        duration_ms=5,
        reported_by="launcher",
        detail="gone",
    )
    await backend.write_completion(child_dir, rec)
    assert await backend.read_completion(child_dir) == rec
    assert await backend.own_session_end(child_dir, ids.session_id()) is None


async def test_a_keeper_waits_for_its_first_daemon(tmp_path: Path) -> None:
    """A keeper that nobody has connected to yet stays for the daemon that started it, however
    late that daemon comes (it used to exit after one idle second, so on a busy host a daemon
    could start with no keeper and hold its children's lifelines itself)."""
    address = holder_address(tmp_path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "roost.backends.local.holder", address, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        assert await proc.stdout.readline() == b"ready\n"
        await asyncio.sleep(2.5)  # longer than the keeper's idle select: it must still be there
        client = HolderClient(address)
        assert client.try_connect()
        assert await client.list() == []
        client.exit()
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_stop_terminates_then_kills_the_group(backend: LocalBackend, tmp_path: Path) -> None:
    child_dir = ChildDir(ids.job_id(), str(tmp_path / "job"), None, None)
    await backend.prepare_dir(child_dir, None, fresh=True)
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\ntime.sleep(60)"
    child = await backend.start(_spec(tmp_path, child_dir, code))
    assert await asyncio.wait_for(child.readline(), 10) == b"up\n"
    assert await child.stop(0.3) is True  # SIGTERM ignored: SIGKILL was needed
    assert child.exited.result() == "killed by SIGKILL"
    assert await child.stop(0.3) is False  # already gone: nothing to do
    child.close()
    await backend.finish_off(child_dir.job_id, child.pid)


async def test_a_running_child_is_found_and_adopted(backend: LocalBackend, tmp_path: Path) -> None:
    child_dir = ChildDir(ids.job_id(), str(tmp_path / "job"), None, None)
    await backend.prepare_dir(child_dir, None, fresh=True)
    child = await backend.start(_spec(tmp_path, child_dir, "import time\nprint('up', flush=True)\ntime.sleep(60)"))
    assert await asyncio.wait_for(child.readline(), 10) == b"up\n"
    found = [f for f in await backend.list_running("test-instance") if f.job_id == child_dir.job_id]
    assert [(f.pid, f.pgid) for f in found] == [(child.pid, child.pid)]
    assert all(f.job_id != child_dir.job_id for f in await backend.list_running("another-instance"))
    adopted = backend.adopt(child.ref)
    assert adopted.alive and await adopted.readline() == b""
    await backend.end_orphan(found[0])
    assert (await asyncio.wait_for(adopted.exited, 10)).startswith("exit status unknown")
    assert await asyncio.wait_for(child.exited, 10) == "killed by SIGKILL"
    adopted.close()
    child.close()
    await backend.finish_off(child_dir.job_id, None)


async def test_refusals_are_one_sentence(backend: LocalBackend, tmp_path: Path) -> None:
    child_dir = ChildDir(ids.job_id(), str(tmp_path / "job"), None, None)
    await backend.prepare_dir(child_dir, None, fresh=True)
    with pytest.raises(ChildDirError) as dir_error:
        await backend.prepare_dir(child_dir, None, fresh=True)  # must not exist yet
    assert dir_error.value.detail == "File exists"
    spec = _spec(tmp_path, child_dir, "")
    missing = StartSpec(**{**{f: getattr(spec, f) for f in spec.__slots__}, "argv": ["/nonexistent/roost-child"]})
    with pytest.raises(StartFailed) as start_error:
        await backend.start(missing)
    assert start_error.value.detail == "/nonexistent/roost-child: No such file or directory"
    assert child_dir.job_id not in await backend.held_lifelines()
    if os.geteuid() == 0:
        backend.check_run_as(12345)  # root switches to any uid
    else:
        with pytest.raises(CannotRunAs, match="cannot start a child as uid"):
            backend.check_run_as(os.geteuid() + 1)
    backend.check_run_as(None)
    backend.check_run_as(os.geteuid())


def test_the_keepers_own_lines_are_json_events_without_a_traceback(tmp_path: Path) -> None:
    """What the keeper says on its stderr (keeper.log) is one JSON event per line, like the
    daemon's: a socket it cannot bind, a wrong command line, never a traceback."""
    keeper = [sys.executable, "-m", "roost.backends.local.holder"]
    unbindable = str(tmp_path / "no-such-dir" / "keeper.sock")
    for args, event in (([unbindable], "keeper_bind_failed"), ([], "keeper_usage")):
        proc = subprocess.run([*keeper, *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0
        assert "Traceback" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        said = json.loads(lines[0])
        assert (said["event"], said["level"], said["logger"]) == (event, "error", "roost.keeper"), said
    assert said["usage"].startswith("python -m roost.backends.local.holder")

"""A workdir swapped after a restart of the daemon, as uid 65534 would try it on a real
``mur-roost`` process.

uid 65534 registers its own workdir; the daemon is killed (``kill -9``: nothing is flushed on the
way out) and started again, so the session is the one start-up reloads from the database. The
attacker then puts another directory where its workdir was: a link into a root 0700 directory,
and a rename plus a fresh ``mkdir`` of the same name (reached with no link at all, so only the
identity recorded at register can tell). A mint and a redeem there are refused with the sentence
a daemon that never restarted gives (docs/security.md, "Workdirs").
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from trust.attacker import NOBODY, owned_dir, request_as

from a2a.door import Door, TaskOutcome
from roost.services.peer.resolve import WORKDIR_REPLACED
from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.doorserve import serve_door
from tests.support.registry import RegistryBuilder

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="forking a client as uid 65534 needs root")
# What the peer plane answers for a walk that finds another workdir, restart or not.
REPLACED = (500, {"error": "io_error", "message": f"read failed: {WORKDIR_REPLACED}"})


async def _ok(_task: Any) -> Any:
    return TaskOutcome.completed("ok")


async def _start(cfg: Path, procs: list[DaemonProcess]) -> DaemonProcess:
    p = await asyncio.get_running_loop().run_in_executor(None, start_daemon_process, ["--config", str(cfg)])
    procs.append(p)
    return p


async def test_a_workdir_swapped_after_a_restart_is_still_refused(
    tmp_path: Path, registry: RegistryBuilder, scratch: Path, daemon_processes: list[DaemonProcess]
) -> None:
    registry.add(
        "exporter",
        capabilities={"network": {"allow": ["localhost", "127.0.0.1"]}},
        extra={"exports": {"peer_files": {"root": "share", "max_ttl": 900}}},
    )
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        f'[roost]\nregistry_path = "{registry.root}"\nstate_dir = "{tmp_path / "state"}"\n'
        f'spawn_allow = ["exporter"]\nruntime_command = ["{sys.executable}"]\n'
    )
    home = owned_dir(scratch, "att", NOBODY, 0o755)
    wd = owned_dir(home, "wd", NOBODY, 0o755)
    (owned_dir(wd, "share", NOBODY, 0o755) / "mine.txt").write_text("mine")
    vault = scratch / "vault"
    (vault / "inner" / "share").mkdir(parents=True)
    vault.chmod(0o700)
    (vault / "inner").chmod(0o755)
    (vault / "inner" / "share" / "mine.txt").write_text("root's secret")
    (vault / "inner" / "share" / "mine.txt").chmod(0o644)

    first = await _start(cfg, daemon_processes)
    sid = "ses_" + os.urandom(8).hex()
    body = {"session_id": sid, "name": "exporter", "version": "0.1.0", "workdir": str(wd)}
    status, answer = await request_as(NOBODY, first.url, "POST", "/register", body)
    assert status == 200, answer
    cred = {"x-murmur-spawn-credential": answer["credential"]}
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    daemon = await _start(cfg, daemon_processes)

    async with serve_door(Door(name="reader", version="0.1.0", session_id="ses_reader", runner=_ok)) as peer:

        async def mint() -> tuple[int, Any]:
            return await request_as(NOBODY, daemon.url, "POST", "/handles", {"path": "mine.txt", "peer": peer}, cred)

        async def redeem(handle: dict[str, str]) -> tuple[int, Any]:
            audience = {"x-murmur-audience": handle["audience"]}
            return await request_as(NOBODY, daemon.url, "GET", f"/resources/peer/{handle['handle']}", headers=audience)

        # The reloaded session serves its own, unchanged workdir.
        status, before = await mint()
        assert status == 200, before
        assert await redeem(before) == (200, "mine")

        # A link into root's 0700 directory where the workdir was.
        os.rename(wd, home / "wd.old")
        os.symlink(vault / "inner", wd)
        os.lchown(wd, NOBODY, NOBODY)
        status, refused = await mint()
        assert (status, refused) == REPLACED
        status, refused = await redeem(before)
        assert (status, refused) == REPLACED

        # A directory of the same name, made afresh: no link anywhere on the path.
        os.unlink(wd)
        (owned_dir(home, "wd", NOBODY, 0o755) / "share").mkdir()
        (wd / "share" / "mine.txt").write_text("planted")
        status, refused = await mint()
        assert (status, refused) == REPLACED
        status, refused = await redeem(before)
        assert (status, refused) == REPLACED

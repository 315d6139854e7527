"""Which machine does a session's file work: ``RaySessionFiles`` routes by the session's job.

No cluster is needed: the local side is the real :class:`LocalSessionFiles` over real files, and
the Ray backend is a test double that records which node it was asked for and answers as a node
seen dead. What must hold: a session with no job is served from this host; a Ray child's session
(by ``job_id``, or by its job's ready line for a top-level child) goes to its job's node; and a
session naming a job this daemon does not know is refused, never read from this host's disk.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from roost.backends.base import BackendError, NodeRef
from roost.backends.local.sessionfiles import LocalSessionFiles
from roost.backends.ray.peerfiles import RaySessionFiles
from roost.services.peer.errors import IoError
from roost.services.peer.files import Export
from roost.system.blocking import BlockingExecutor

NODE = NodeRef("node-w1", "10.0.0.2")


class BackendDouble:
    """Records every node it is asked for; each node is dead (as :meth:`RayBackend.keeper_at` says)."""

    def __init__(self) -> None:
        self.asked: list[NodeRef] = []

    async def keeper_at(self, node: NodeRef) -> Any:
        self.asked.append(node)
        raise BackendError(f"the Ray node {node.node_id} died")


@pytest.fixture
def executor() -> Iterator[BlockingExecutor]:
    ex = BlockingExecutor()
    yield ex
    ex.shutdown()


def _setup(tmp_path: Path, executor: BlockingExecutor, jobs: dict[str, Any]) -> tuple[RaySessionFiles, Export]:
    (tmp_path / "share").mkdir()
    (tmp_path / "share" / "f.txt").write_bytes(b"here")
    files = RaySessionFiles(BackendDouble(), LocalSessionFiles(executor), lambda: jobs, timeout_secs=5)  # type: ignore[arg-type]
    return files, Export(str(tmp_path), ("share",), 1024, None, False)


def _rec(job_id: str | None, session_id: str = "ses_0123456789abcdef") -> Any:
    return SimpleNamespace(session_id=session_id, job_id=job_id, uid=None)


async def test_a_session_without_a_job_is_served_from_this_host(tmp_path: Path, executor: BlockingExecutor) -> None:
    files, export = _setup(tmp_path, executor, {"job_other": SimpleNamespace(session_id="ses_x", node=NODE)})
    assert await files.mint_target(_rec(None), export, ("f.txt",)) == ("f.txt",)
    body = await files.open_export(_rec(None), export, ("f.txt",))
    assert getattr(body, "data", None) == b"here"
    assert files.backend.asked == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("by", ["job_id", "ready line"])
async def test_a_ray_childs_session_goes_to_its_jobs_node(tmp_path: Path, executor: BlockingExecutor, by: str) -> None:
    sid = "ses_fedcba9876543210"
    files, export = _setup(tmp_path, executor, {"job_a": SimpleNamespace(job_id="job_a", session_id=sid, node=NODE)})
    rec = _rec("job_a" if by == "job_id" else None, sid)
    for step in (files.mint_target(rec, export, ("f.txt",)), files.open_export(rec, export, ("f.txt",))):
        with pytest.raises(IoError) as err:
            await step
        assert "node-w1" in err.value.message and str(tmp_path) not in err.value.message
    assert files.backend.asked == [NODE, NODE]  # type: ignore[attr-defined]
    with pytest.raises(OSError):
        await files.peer_in(rec, str(tmp_path)).open()
    assert not (tmp_path / "peer-in").exists()


async def test_a_session_naming_an_unknown_job_is_refused_not_read_here(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    files, export = _setup(tmp_path, executor, {})
    rec = _rec("job_gone")
    with pytest.raises(IoError, match="not known"):
        await files.mint_target(rec, export, ("f.txt",))
    with pytest.raises(IoError, match="not known"):
        await files.open_export(rec, export, ("f.txt",))
    sink = files.peer_in(rec, str(tmp_path))
    with pytest.raises(OSError):
        await sink.open()
    await sink.abort()
    assert not (tmp_path / "peer-in").exists()
    assert files.backend.asked == []  # type: ignore[attr-defined]


class OldKeeperBackend(BackendDouble):
    """A node whose keeper was started by an older daemon: it answers, but has no peer-file calls."""

    async def keeper_at(self, node: NodeRef) -> Any:
        self.asked.append(node)
        return SimpleNamespace(info=lambda: None)


async def test_a_keeper_without_the_peer_calls_is_refused_in_one_sentence(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    files, export = _setup(tmp_path, executor, {"job_a": SimpleNamespace(job_id="job_a", session_id="s", node=NODE)})
    files.backend = OldKeeperBackend()  # type: ignore[assignment]
    rec = _rec("job_a")
    for step in (files.mint_target(rec, export, ("f.txt",)), files.open_export(rec, export, ("f.txt",))):
        with pytest.raises(IoError, match="started by an older daemon"):
            await step
    with pytest.raises(OSError, match="started by an older daemon"):
        await files.peer_in(rec, str(tmp_path)).open()

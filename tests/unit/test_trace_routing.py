"""The trace sink routes a remote session's lines to its node, in order and in batches, redacted
before they leave; a local session keeps its local writer. And the record reads a node answers
(``roostctl logs -f``, ``roostctl job``) walk no link and no ``..``.

The node is a test double of the :class:`roost.observe.tracesink.NodeTraces` interface that appends the
lines to a real trace file with :func:`roost.observe.tracelines.append_lines`, as a node keeper does.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.backends.base import ChildDir, NodeRef
from roost.observe.tracelines import append_lines, read_trace, trace_path
from roost.observe.tracesink import TraceFiles
from roost.services.launcher.childrecords import list_names, read_at, record_parts
from roost.state.sessions import SessionRecord
from roost.system.blocking import BlockingExecutor
from roost.system.fsutil import Place

HANDLE = "mh1.abcdefghijklmnop.qrstuvwxyz012345"


class NodeDouble:
    """A node's side: appends what it is sent to the session's trace under ``root`` (blocking
    work in a thread, like a keeper's), recording each batch; can be told to fail."""

    def __init__(self, remote: dict[str, ChildDir]) -> None:
        self.remote = remote
        self.batches: list[list[tuple[str, dict[str, object]]]] = []
        self.fail = False
        self.gate: asyncio.Event | None = None

    def remote_dir(self, rec: SessionRecord) -> ChildDir | None:
        return self.remote.get(rec.session_id)

    async def append_trace(
        self, dir: ChildDir, session_id: str, lines: Sequence[tuple[str, dict[str, object]]]
    ) -> list[str]:
        self.batches.append(list(lines))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise OSError("the node keeper is gone")
        return await asyncio.to_thread(append_lines, dir.workdir, session_id, list(lines))


def _rec(session_id: str, workdir: Path) -> Any:
    """Only the fields the sink reads (a SessionRecord has many more)."""
    return SimpleNamespace(session_id=session_id, workdir=str(workdir), uid=None, job_id=None)


@pytest.fixture
def executor() -> Any:
    ex = BlockingExecutor()
    yield ex
    ex.shutdown()


async def test_a_remote_sessions_lines_go_to_its_node_in_order_batched_and_redacted(
    tmp_path: Path, executor: Any
) -> None:
    remote_wd, local_wd = tmp_path / "node" / "jobs" / "job_x", tmp_path / "here"
    remote_wd.mkdir(parents=True)
    local_wd.mkdir()
    node = NodeDouble({"ses_remote": ChildDir("job_x", str(remote_wd), None, None, NodeRef("n1", "10.0.0.2"))})
    sink = TraceFiles(executor, node)
    remote, local = _rec("ses_remote", remote_wd), _rec("ses_local", local_wd)
    # The first line goes alone; the next 50, written while it is on its way, go as one batch.
    node.gate = asyncio.Event()
    first = asyncio.create_task(sink.write(remote, "a2a_send", {"n": 0, "token": HANDLE}))
    await asyncio.sleep(0)
    rest = [asyncio.create_task(sink.write(remote, "a2a_send", {"n": i})) for i in range(1, 51)]
    await asyncio.sleep(0.05)
    node.gate.set()
    ids = [await first, *await asyncio.gather(*rest)]
    assert [len(b) for b in node.batches] == [1, 50]
    assert HANDLE not in repr(node.batches), "a token left the daemon"
    lines = read_trace(trace_path(remote_wd, "ses_remote"))
    assert [ln["n"] for ln in lines] == list(range(51))
    assert [ln["event_id"] for ln in lines] == ids
    assert sink.writer(remote) is None  # no local file is held for a remote session
    # A local session never reaches the node.
    assert await sink.write(local, "a2a_send", {"n": "here"}) is not None
    assert read_trace(trace_path(local_wd, "ses_local"))[0]["n"] == "here"
    assert len(node.batches) == 2
    await sink.close_all()


async def test_a_node_that_fails_costs_the_lines_not_the_caller(tmp_path: Path, executor: Any) -> None:
    wd = tmp_path / "wd"
    wd.mkdir()
    node = NodeDouble({"ses_r": ChildDir("job_y", str(wd), None, None, NodeRef("n2", "10.0.0.3"))})
    node.fail = True
    sink = TraceFiles(executor, node)
    rec = _rec("ses_r", wd)
    assert await asyncio.gather(*(sink.write(rec, "delegation", {"i": i}) for i in range(3))) == [None] * 3
    node.fail = False
    assert await sink.write(rec, "delegation", {"i": 3}) is not None  # the next line still goes
    assert [ln["i"] for ln in read_trace(trace_path(wd, "ses_r"))] == [3]
    await sink.close(rec)


async def test_lines_queued_at_session_end_reach_the_node_before_close_returns(tmp_path: Path, executor: Any) -> None:
    wd = tmp_path / "wd"
    wd.mkdir()
    node = NodeDouble({"ses_c": ChildDir("job_z", str(wd), None, None, NodeRef("n3", "h"))})
    sink = TraceFiles(executor, node)
    rec = _rec("ses_c", wd)
    pending = [asyncio.create_task(sink.write(rec, "peer_handle_redeemed", {"i": i})) for i in range(5)]
    await asyncio.sleep(0)
    await sink.close(rec)
    assert len(read_trace(trace_path(wd, "ses_c"))) == 5
    await asyncio.gather(*pending)


def test_append_lines_parents_each_line_to_the_session_node(tmp_path: Path) -> None:
    from roost.observe.tracelines import TraceWriter

    own = TraceWriter(tmp_path, "ses_1")
    start = own.write("session_start", {}, parent_id=None)
    own.close()
    ids = append_lines(tmp_path, "ses_1", [("delegation_start", {"a": 1}), ("delegation", {"a": 2})])
    lines = read_trace(trace_path(tmp_path, "ses_1"))
    assert [ln["event_id"] for ln in lines[1:]] == ids
    assert all(ln["parent_id"] == start for ln in lines[1:])


@pytest.mark.parametrize("name", ["", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a/.", "a\x00b"])
def test_a_record_name_never_leaves_the_childs_directory(name: str) -> None:
    with pytest.raises(ValueError):
        record_parts(name)


def test_reads_follow_no_link(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("secret\n")
    wd = tmp_path / "wd"
    (wd / "out").mkdir(parents=True)
    (wd / "out" / "result.txt").write_text("mine\n")
    os.symlink(tmp_path / "secret", wd / "out" / "link.txt")
    os.symlink(tmp_path, wd / ".murmur")
    place = Place(str(wd))
    assert read_at(place, "out/link.txt", 0) == (0, b"")
    assert read_at(place, ".murmur/secret", 0) == (0, b"")
    assert list_names(place, "out") == ["result.txt"]
    assert list_names(place, ".murmur") == []


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=300), offset=st.integers(min_value=-400, max_value=400), size=st.integers(1, 64))
def test_reading_on_from_where_a_read_ended_yields_the_file_exactly(
    tmp_path_factory: Any, data: bytes, offset: int, size: int
) -> None:
    """From any first offset (a tail when negative, a restart at 0 past the end), reading on from
    ``start + len(chunk)`` returns the file's bytes from that start, with nothing lost or repeated."""
    wd = tmp_path_factory.mktemp("rd")
    (wd / "f.log").write_bytes(data)
    place = Place(str(wd))
    start, chunk = read_at(place, "f.log", offset, size)
    expected_start = max(0, len(data) - size) if offset < 0 else offset if offset <= len(data) else 0
    assert start == expected_start
    got, pos = bytearray(chunk), start + len(chunk)
    while True:
        nxt, more = read_at(place, "f.log", pos, size)
        assert nxt == pos
        if not more:
            break
        got += more
        pos += len(more)
    assert bytes(got) == data[start:]


async def test_a_readopted_remote_parents_trace_is_looked_up_on_its_node(tmp_path: Path, executor: Any) -> None:
    """After a restart the launcher looks for a line it may already have written; for a parent on
    another node it reads the trace there (through the backend, at the job's directory), not at
    the path on this host."""
    from roost.backends.local.backend import LocalBackend
    from roost.services.launcher.delegation import DelegationTrace

    node_wd, here_wd = tmp_path / "node" / "job_p", tmp_path / "here"
    node_wd.mkdir(parents=True)
    here_wd.mkdir()
    append_lines(node_wd, "ses_p", [("delegation_start", {"delegation_id": "dlg_1"})])
    job = SimpleNamespace(
        job_id="job_p",
        workdir=str(node_wd),
        parent_workdir=None,
        uid=None,
        process_uid=None,
        node=NodeRef("n1", "h"),
        session_id="ses_p",
    )
    backend = LocalBackend(executor, state_dir=tmp_path / "state", job_cgroups="off", max_starting=2)

    async def no_write(*_: Any) -> str | None:
        raise AssertionError("nothing is written here")

    parent = SimpleNamespace(session_id="ses_p", workdir=str(here_wd), job_id="job_p")
    remote = DelegationTrace(no_write, executor, backend=backend, jobs=lambda: {"job_p": job})
    assert await remote.has(parent, "delegation_start", "dlg_1")  # type: ignore[arg-type]
    assert not await remote.has(parent, "delegation", "dlg_1")  # type: ignore[arg-type]
    job.node = None  # on this host: the path the parent registered
    assert not await remote.has(parent, "delegation_start", "dlg_1")  # type: ignore[arg-type]

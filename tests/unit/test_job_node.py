"""A job's node survives the jobs table both ways it is read (the job repository, and a raw row),
so a restarted daemon finds each child on its node again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from roost.backends.base import NodeRef
from roost.core.jobs import Job
from roost.state.repos.jobs import JobRepository, job_from_row
from roost.state.store import Store
from roost.system.blocking import BlockingExecutor


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = Store(tmp_path / "state.db", BlockingExecutor())
    await s.open()
    yield s
    await s.close()


def job(job_id: str, node: NodeRef | None) -> Job:
    return Job(
        job_id=job_id,
        delegation_id="dlg_" + "0" * 32,
        name="worker",
        version="0.1.0",
        sha256="a" * 64,
        workdir="/n/jobs/x",
        trust="trusted",
        deadline_secs=60.0,
        created_ms=1,
        node=node,
    )


@pytest.mark.parametrize("node", [NodeRef("f" * 56, "10.0.0.7"), None])
async def test_the_node_round_trips(store: Store, node: NodeRef | None) -> None:
    repo = JobRepository(store)
    a, b = "job_" + "1" * 32, "job_" + "2" * 32
    await store.commit([repo.upsert_op(job(a, node)), repo.upsert_op(job(b, node))])
    for job_id in (a, b):
        via_repo = await repo.get(job_id)
        rows = store.rows("SELECT * FROM jobs WHERE job_id = ?", (job_id,))
        assert via_repo is not None and via_repo.node == node
        assert job_from_row(rows[0]).node == node
        assert via_repo.view()["node"] == (node.to_dict() if node else None)

"""Group commit: concurrent writers share transactions, a bad write fails only its caller."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from roost.state.store import Store, StoreError
from roost.system.blocking import BlockingExecutor


async def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "s.db", BlockingExecutor())
    await store.open()
    return store


async def test_concurrent_commits_are_durable_and_grouped(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    await asyncio.gather(
        *(store.commit([("INSERT INTO spent (jti, exp_ms) VALUES (?, ?)", (f"j{i}", i))]) for i in range(200))
    )
    rows = store.rows("SELECT COUNT(*) AS n FROM spent")
    assert rows[0]["n"] == 200
    await store.close()
    reopened = await _store(tmp_path)
    assert reopened.rows("SELECT COUNT(*) AS n FROM spent")[0]["n"] == 200
    assert reopened.rows("PRAGMA journal_mode")[0][0] == "wal"
    await reopened.close()


async def test_a_bad_write_fails_only_its_caller(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    await store.commit([("INSERT INTO spent (jti, exp_ms) VALUES ('dup', 1)", ())])
    good = store.commit([("INSERT INTO spent (jti, exp_ms) VALUES ('ok', 1)", ())])
    bad = store.commit([("INSERT INTO spent (jti, exp_ms) VALUES ('dup', 2)", ())])
    results = await asyncio.gather(good, bad, return_exceptions=True)
    assert results[0] is None
    assert isinstance(results[1], StoreError)
    assert "could not be written" in str(results[1])
    jtis = {r["jti"] for r in store.rows("SELECT jti FROM spent")}
    assert jtis == {"dup", "ok"}
    await store.close()


async def test_write_behind_is_flushed_on_close(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    for i in range(50):
        store.enqueue([("INSERT INTO spent (jti, exp_ms) VALUES (?, ?)", (f"w{i}", i))])
    await store.close()
    reopened = await _store(tmp_path)
    assert reopened.rows("SELECT COUNT(*) AS n FROM spent")[0]["n"] == 50
    await reopened.close()


async def test_closed_store_refuses_commits(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.commit([("SELECT 1", ())])


async def test_memory_store_for_ephemeral_mode() -> None:
    store = Store(None, BlockingExecutor())
    await store.open()
    await store.commit([("INSERT INTO meta (key, value) VALUES ('a', 'b')", ())])
    assert store.rows("SELECT value FROM meta")[0]["value"] == "b"
    await store.close()


async def test_unusable_database_is_one_sentence(tmp_path: Path) -> None:
    bad = tmp_path / "s.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    store = Store(bad, BlockingExecutor())
    with pytest.raises(StoreError, match="is unusable"):
        await store.open()


async def test_write_behind_skips_the_fsync_and_a_commit_restores_it(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    store.enqueue([("INSERT INTO spent (jti, exp_ms) VALUES ('behind', 1)", ())])
    for _ in range(200):
        if store.rows("SELECT COUNT(*) AS n FROM spent")[0]["n"] == 1:
            break
        await asyncio.sleep(0.01)
    assert store.rows("PRAGMA synchronous")[0][0] == 1  # NORMAL: in the WAL, not yet fsynced
    await store.commit([("INSERT INTO spent (jti, exp_ms) VALUES ('durable', 1)", ())])
    assert store.rows("PRAGMA synchronous")[0][0] == 2  # FULL: this commit's fsync covers both
    await store.close()
    reopened = await _store(tmp_path)
    assert {r["jti"] for r in reopened.rows("SELECT jti FROM spent")} == {"behind", "durable"}
    await reopened.close()

"""The reservation journal: slot codec, replay against a model, batching, compaction, migration."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.services.referee.reservelog import COMPACT_EVERY_MS, ReservationJournal, decode_slot, encode_slot, replay
from roost.state.sessions import Reservation
from roost.state.store import BEHIND_DELAY, MIGRATIONS, Store, _split_sql
from roost.system.blocking import BlockingExecutor

ids = st.text(alphabet="0123456789abcdef_", min_size=1, max_size=12)
slots = st.builds(
    Reservation,
    jti=ids,
    parent_id=ids,
    name=st.text(min_size=1, max_size=8),
    version=st.text(min_size=1, max_size=8),
    sha256=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    depth=st.integers(min_value=0, max_value=16),
    trust=st.sampled_from(["trusted", "untrusted"]),
    exp_ms=st.integers(min_value=0, max_value=2**53),
    job_id=st.none() | ids,
)


def _slot(jti: str, exp_ms: int = 10_000, parent: str = "ses_p") -> Reservation:
    return Reservation(jti, parent, "worker", "0.1.0", "0" * 64, 2, "trusted", exp_ms, None)


@given(slots)
def test_slot_codec_round_trips(res: Reservation) -> None:
    assert decode_slot(orjson.loads(orjson.dumps(encode_slot(res)))) == res


@pytest.mark.parametrize(
    "item",
    [
        None,
        [],
        ["j", "p", "n", "v", "s", 1, "trusted", 5],  # 8 fields
        ["j", "p", "n", "v", "s", "1", "trusted", 5, None],  # depth as text
        ["j", "p", "n", "v", "s", 1, "admin", 5, None],  # unknown trust
        ["j", "p", "n", "v", "s", 1, "trusted", 5.5, None],  # fractional expiry
        ["j", 7, "n", "v", "s", 1, "trusted", 5, None],  # parent id not a string
        ["j", "p", "n", "v", "s", True, "trusted", 5, None],  # bool is not a depth
        ["j", "p", "n", "v", "s", 1, "trusted", 5, 9],  # job id not a string
    ],
)
def test_decode_refuses_every_other_shape(item: Any) -> None:
    with pytest.raises(ValueError):
        decode_slot(item)


# A journal history: batches of ("grant", slot index) / ("release", slot index) steps.
steps = st.lists(st.lists(st.tuples(st.sampled_from(["grant", "release"]), st.integers(0, 9)), max_size=8), max_size=8)


@settings(max_examples=300)
@given(steps, st.lists(st.integers(0, 2000), min_size=10, max_size=10), st.integers(0, 2000))
def test_replay_matches_a_model_of_grants_and_releases(
    batches: list[list[tuple[str, int]]], exps: list[int], now: int
) -> None:
    pool = [_slot(f"j{i}", exp_ms=exps[i]) for i in range(10)]
    model: dict[str, Reservation] = {}
    ever: set[str] = set()
    rows: list[tuple[bytes, bytes]] = []
    for batch in batches:
        granted: dict[str, Reservation] = {}
        released: list[str] = []
        for kind, i in batch:
            res = pool[i]
            if kind == "grant":
                if res.jti in ever:
                    continue  # approval ids are random: a slot is granted once
                ever.add(res.jti)
                granted[res.jti] = res
                model[res.jti] = res
            elif res.jti in model:
                # Only a held slot is ever released (the table says so before the journal).
                model.pop(res.jti)
                if granted.pop(res.jti, None) is None:
                    released.append(res.jti)
        rows.append((orjson.dumps([encode_slot(r) for r in granted.values()]), orjson.dumps(released)))
    got = replay(rows, now)
    assert [r.exp_ms for r in got] == sorted(r.exp_ms for r in got)
    assert sorted(got, key=lambda r: r.jti) == sorted(
        (r for r in model.values() if r.exp_ms > now), key=lambda r: r.jti
    )


def test_replay_skips_an_unreadable_row_and_keeps_the_rest() -> None:
    good = (orjson.dumps([encode_slot(_slot("a"))]), b"[]")
    rows = [(b"{not json", b"[]"), (b"[]", b'{"x": 1}'), (b"[[1]]", b"[]"), good]
    assert [r.jti for r in replay(rows, 0)] == ["a"]


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


async def _open(tmp_path: Path) -> Store:
    store = Store(tmp_path / "s.db", BlockingExecutor())
    await store.open()
    return store


def _journal_rows(store: Store) -> list[tuple[Any, Any]]:
    return [
        (r["granted"], r["released"]) for r in store.rows("SELECT granted, released FROM reservation_log ORDER BY seq")
    ]


async def test_one_row_per_flush_and_a_slot_released_in_its_own_batch_never_lands(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    clock = _Clock()
    journal = ReservationJournal(store, clock)
    a, b, c = _slot("a", 2_000_000), _slot("b", 2_000_000), _slot("c", 2_000_000)
    for res in (a, b, c):
        journal.granted(res)
    journal.released([b])
    assert journal.pending == 2
    await store.close()  # a clean stop flushes what is pending
    store = await _open(tmp_path)
    rows = _journal_rows(store)
    assert len(rows) == 1
    assert replay(rows, clock.now) == [a, c]
    journal = ReservationJournal(store, clock)
    journal.released([a])
    await store.close()
    store = await _open(tmp_path)
    rows = _journal_rows(store)
    assert len(rows) == 2 and orjson.loads(rows[1][1]) == ["a"]
    assert replay(rows, clock.now) == [c]
    await store.close()


async def test_write_behind_lands_without_a_close(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    journal = ReservationJournal(store, _Clock())
    journal.granted(_slot("a", 2_000_000))
    await store.commit([("INSERT INTO spent (jti, exp_ms) VALUES ('x', 1)", ())])
    # The commit flush drains the journal in the same transaction.
    assert len(_journal_rows(store)) == 1
    journal.granted(_slot("b", 2_000_000))
    for _ in range(100):
        if len(_journal_rows(store)) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(_journal_rows(store)) == 2
    await store.close()


async def test_a_storm_of_grants_is_written_once_per_tick_not_once_per_write(tmp_path: Path) -> None:
    """Grants arriving while a flush is being written wait for the next tick (BEHIND_DELAY).

    They used to start the next transaction the moment the previous one returned, so a storm of
    grants turned into a transaction per millisecond or so, competing with the loop for its core.
    """
    store = await _open(tmp_path)
    journal = ReservationJournal(store, _Clock())
    loop = asyncio.get_running_loop()
    end = loop.time() + 0.5
    n = 0
    while loop.time() < end:
        journal.granted(_slot(f"j{n}", 2_000_000))
        n += 1
        await asyncio.sleep(0)
    for _ in range(100):  # the last batch lands within a tick, without a close
        if journal.pending == 0 and store._idle.is_set():
            break
        await asyncio.sleep(0.01)
    rows = _journal_rows(store)
    assert sum(len(orjson.loads(g)) for g, _ in rows) == n  # every grant landed, once
    # 0.5 s at one flush per 20 ms tick is about 25 rows; chained flushes made hundreds. (How many
    # grants fit in the 0.5 s depends on the machine, so nothing is asserted of n itself.)
    assert len(rows) <= 0.5 / BEHIND_DELAY + 10, (n, len(rows))
    await store.close()


async def test_compaction_runs_at_most_once_a_second_and_drops_only_expired_rows(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    clock = _Clock()
    journal = ReservationJournal(store, clock)
    journal.granted(_slot("old", clock.now + 10))
    await store.close()
    store = await _open(tmp_path)
    journal = ReservationJournal(store, clock)
    clock.now += 20
    journal.granted(_slot("new", clock.now + 60_000))
    first = journal.drain()
    assert [sql.split()[0] for sql, _ in first] == ["INSERT", "DELETE"]
    journal.granted(_slot("newer", clock.now + 60_000))
    assert [sql.split()[0] for sql, _ in journal.drain()] == ["INSERT"]
    clock.now += COMPACT_EVERY_MS
    journal.granted(_slot("newest", clock.now + 60_000))
    assert [sql.split()[0] for sql, _ in journal.drain()] == ["INSERT", "DELETE"]
    store.write_sync(first)
    remaining = replay(_journal_rows(store), clock.now)
    assert [r.jti for r in remaining] == ["new"]
    assert len(_journal_rows(store)) == 1  # the expired row itself is gone, not just filtered
    await store.close()


def test_migration_carries_pending_slots_into_the_journal(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    for idx in range(2):
        for stmt in _split_sql(MIGRATIONS[idx]):
            conn.execute(stmt)
        conn.execute(f"PRAGMA user_version={idx + 1}")
    conn.execute(
        "INSERT INTO reservations (jti, parent_id, name, version, sha256, depth, trust, exp_ms, job_id)"
        " VALUES ('j1', 'ses_p', 'worker', '0.1.0', ?, 2, 'untrusted', 5000, 'job_1'),"
        " ('j2', 'ses_p', 'worker', '0.1.0', ?, 1, 'trusted', 9000, NULL)",
        ("a" * 64, "b" * 64),
    )
    conn.close()

    async def reopen() -> list[Reservation]:
        store = Store(db, BlockingExecutor())
        await store.open()
        try:
            assert store.rows("PRAGMA user_version")[0][0] == len(MIGRATIONS)
            tables = {r[0] for r in store.rows("SELECT name FROM sqlite_master WHERE type = 'table'")}
            assert "reservations" not in tables
            assert store.rows("SELECT max_exp_ms FROM reservation_log")[0][0] == 9000
            return replay(_journal_rows(store), 0)
        finally:
            await store.close()

    got = asyncio.run(reopen())
    assert got == [
        Reservation("j1", "ses_p", "worker", "0.1.0", "a" * 64, 2, "untrusted", 5000, "job_1"),
        Reservation("j2", "ses_p", "worker", "0.1.0", "b" * 64, 1, "trusted", 9000, None),
    ]


def test_migration_of_an_empty_reservation_table_writes_no_row(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    for stmt in _split_sql(MIGRATIONS[0]):
        conn.execute(stmt)
    conn.execute("PRAGMA user_version=1")
    conn.close()
    Store._migrate(conn := sqlite3.connect(db, isolation_level=None))
    assert conn.execute("SELECT COUNT(*) FROM reservation_log").fetchone()[0] == 0
    conn.close()

"""Spent approval ids: the cost of one redemption's replay check and record, at 1k, 100k and 1M held ids.

The table is filled with unexpired ids (as under a long storm of redemptions), then each round
times ``SessionTable.spend`` of fresh ids (the check and the record) and of replays (refused),
rounds alternating between the sizes so a noisy neighbour hits each alike. The 1k table is the
same-run baseline. Target: flat. What remains of a ratio above 1 is the memory hierarchy (a
million-entry dict does not fit in the CPU caches, so a lookup misses them), not work per id:
the check is one dict lookup and forgetting expired ids walks only the seconds that lapsed.

Run: python bench/bench_spend.py [--rounds 7] [--ops 20000]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from roost.sessions import SessionTable

SIZES = (1_000, 100_000, 1_000_000)
NOW_MS = 1_000_000_000
TTL_MS = 60_000


def filled(size: int) -> SessionTable:
    table = SessionTable()
    for i in range(size):
        # Expiries spread over the whole approval lifetime, as redemptions arrive over a minute.
        table.spend(f"{i:032x}", NOW_MS + 1 + i % TTL_MS, NOW_MS)
    return table


def one_round(table: SessionTable, size: int, ops: int) -> tuple[float, float, float]:
    fresh = [os.urandom(16).hex() for _ in range(ops)]
    held = [f"{i:032x}" for i in range(0, size, max(1, size // ops))]
    spend = table.spend
    exp = NOW_MS + TTL_MS
    t0 = time.perf_counter_ns()
    for jti in fresh:
        spend(jti, exp, NOW_MS)
    t1 = time.perf_counter_ns()
    for jti in held:
        spend(jti, exp, NOW_MS)
    t2 = time.perf_counter_ns()
    for jti in fresh:  # keep the table at its size for the next round
        del table.spent[jti]
    # The floor: a bare dict membership test of the same replays in the same table.
    spent = table.spent
    others = [f"{i:032x}" for i in range(3, size, max(1, size // ops))]  # as cold as ``held`` was
    t3 = time.perf_counter_ns()
    for jti in others:
        _ = jti in spent
    t4 = time.perf_counter_ns()
    return (t1 - t0) / ops, (t2 - t1) / len(held), (t4 - t3) / len(others)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ops", type=int, default=20_000)
    args = ap.parse_args()
    tables = {size: filled(size) for size in SIZES}
    gc.collect()
    gc.freeze()
    results: dict[int, list[tuple[float, float, float]]] = {size: [] for size in SIZES}
    for r in range(args.rounds):
        order = SIZES if r % 2 == 0 else tuple(reversed(SIZES))
        for size in order:
            results[size].append(one_round(tables[size], size, min(args.ops, size)))
    base_new = statistics.median(x[0] for x in results[SIZES[0]])
    base_rep = statistics.median(x[1] for x in results[SIZES[0]])
    print(f"spent-id check, median of {args.rounds} alternating rounds (baseline: {SIZES[0]} ids, same run)")
    print("  (dict ns: a bare `in` test of other held ids in the same table, the memory hierarchy's floor)")
    head = ("held ids", "new ns/op", "vs 1k", "replay ns/op", "vs 1k", "dict ns", "replay/dict")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (10, 10, 6, 13, 6, 8, 12), strict=True)))
    for size in SIZES:
        new = statistics.median(x[0] for x in results[size])
        rep = statistics.median(x[1] for x in results[size])
        floor = statistics.median(x[2] for x in results[size])
        print(
            f"{size:>10} {new:>10.0f} {new / base_new:>6.2f} {rep:>13.0f} {rep / base_rep:>6.2f}"
            f" {floor:>8.0f} {rep / floor:>12.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

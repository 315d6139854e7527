"""Spent approval ids: the cost of one redemption's replay check and record, at 1k, 100k and 1M held ids.

The table is filled with unexpired ids (as under a long storm of redemptions), then each round
times ``SessionTable.spend`` of fresh ids (the check and the record) and of replays (refused),
rounds alternating between the sizes so a noisy neighbour hits each alike. The same-run
baseline at each size is a bare dict of the same ids used the same way (a function that looks
the id up and inserts it), so what the memory hierarchy adds — a million-entry dict does not fit
in the CPU caches, and a bare dict slows down just as much — cancels out. Target: flat relative
to the bare dict (the spend/bare ratios at 1k, 100k and 1M within 2x of each other, each <= 3x).
The check is one dict lookup; forgetting expired ids walks only the seconds that lapsed.

Run: python bench/bench_spend.py [--rounds 7] [--ops 20000]
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from roost.state.sessions import SessionTable

SIZES = (1_000, 100_000, 1_000_000)
NOW_MS = 1_000_000_000
TTL_MS = 60_000


def filled(size: int) -> SessionTable:
    table = SessionTable()
    for i in range(size):
        # Expiries spread over the whole approval lifetime, as redemptions arrive over a minute.
        table.spend(f"{i:032x}", NOW_MS + 1 + i % TTL_MS, NOW_MS)
    return table


def bare_spend(spent: dict[str, int], jti: str, exp_ms: int, _now_ms: int) -> bool:
    """The floor of any spent-id check in Python: one call, one lookup, one insert."""
    if jti in spent:
        return False
    spent[jti] = exp_ms
    return True


def one_round(table: SessionTable, bare: dict[str, int], size: int, ops: int) -> list[float]:
    """ns per op: spend new, spend replay, bare new, bare replay, raw ``in`` (see the docstring)."""
    fresh = [os.urandom(16).hex() for _ in range(ops)]
    held = [f"{i:032x}" for i in range(0, size, max(1, size // ops))]
    others = [f"{i:032x}" for i in range(3, size, max(1, size // ops))]  # as cold as ``held`` was
    exp = NOW_MS + TTL_MS
    out: list[float] = []
    for spend, spent in ((table.spend, table.spent), (functools.partial(bare_spend, bare), bare)):
        t0 = time.perf_counter_ns()
        for jti in fresh:
            spend(jti, exp, NOW_MS)
        t1 = time.perf_counter_ns()
        for jti in held:
            spend(jti, exp, NOW_MS)
        t2 = time.perf_counter_ns()
        for jti in fresh:  # keep the table at its size for the next round
            del spent[jti]
        out += [(t1 - t0) / ops, (t2 - t1) / len(held)]
    t3 = time.perf_counter_ns()
    for jti in others:
        _ = jti in bare
    t4 = time.perf_counter_ns()
    return [*out, (t4 - t3) / len(others)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ops", type=int, default=20_000)
    args = ap.parse_args()
    tables = {size: filled(size) for size in SIZES}
    bares = {size: dict(tables[size].spent) for size in SIZES}
    gc.collect()
    gc.freeze()
    results: dict[int, list[list[float]]] = {size: [] for size in SIZES}
    for r in range(args.rounds):
        order = SIZES if r % 2 == 0 else tuple(reversed(SIZES))
        for size in order:
            results[size].append(one_round(tables[size], bares[size], size, min(args.ops, size)))
    print(f"spent-id check, ns/op, median of {args.rounds} alternating rounds (same run)")
    print("  spend: SessionTable.spend; bare: a plain dict behind a function (lookup + insert);")
    print("  in: a bare `in` test inline in the loop (no call), the memory hierarchy's floor")
    head = ("held ids", "new", "bare new", "ratio", "replay", "bare rep", "ratio", "in", "replay/in")
    widths = (10, 7, 9, 6, 7, 9, 6, 6, 10)
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
    ratios: list[float] = []
    for size in SIZES:
        new, rep, bnew, brep, raw = (statistics.median(x[i] for x in results[size]) for i in range(5))
        ratios += [new / bnew, rep / brep]
        print(
            f"{size:>10} {new:>7.0f} {bnew:>9.0f} {new / bnew:>6.2f} {rep:>7.0f} {brep:>9.0f} {rep / brep:>6.2f}"
            f" {raw:>6.0f} {rep / raw:>10.2f}"
        )
    spread = max(ratios) / min(ratios)
    met = spread <= 2.0 and max(ratios) <= 3.0
    print(
        f"ratio to the bare dict: {min(ratios):.2f}..{max(ratios):.2f}, spread {spread:.2f}x"
        f"  (target: flat relative to the bare dict, spread <= 2x and every ratio <= 3x: {'met' if met else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

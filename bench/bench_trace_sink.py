"""The trace sink: a local session's line costs the same with or without the Ray routing, and a
remote session's lines are amortised by batching.

In one process, on real files, through a real BlockingExecutor, rounds alternating:

* ``local``         — TraceFiles without node routing (``launcher = "local"``), one session;
* ``local+nodes``   — the same session with routing on (``launcher = "ray"``) and 500 jobs in
                      memory, none of them this session's: the baseline it must match;
* ``remote``        — a session routed to a node double that appends each batch to a real file
                      in a worker thread (what a keeper does, minus Ray's call cost).

Each variant writes ``--lines`` lines, ``--writers`` at a time (awaited like the relay awaits
its ``a2a_send`` line). Reported: median lines/s per variant, the ratio local+nodes/local
(target ~1.0) and the batches the remote variant needed.

Run: python bench/bench_trace_sink.py [--lines 3000] [--writers 32] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from roost.backends.base import ChildDir, NodeRef
from roost.backends.jobnodes import JobNodes
from roost.observe.tracelines import append_lines
from roost.observe.tracesink import TraceFiles
from roost.system.blocking import BlockingExecutor


class NodeDouble:
    """A node: appends each batch to the real file in a worker thread, as a keeper does."""

    def __init__(self, dir: ChildDir | None = None) -> None:
        self.dir = dir
        self.batches = 0

    def remote_dir(self, rec: Any) -> ChildDir | None:
        return self.dir

    async def append_trace(
        self, dir: ChildDir, session_id: str, lines: Sequence[tuple[str, dict[str, object]]]
    ) -> list[str]:
        self.batches += 1
        return await asyncio.to_thread(append_lines, dir.workdir, session_id, list(lines))


async def _write(sink: TraceFiles, rec: Any, lines: int, writers: int) -> float:
    sem = asyncio.Semaphore(writers)

    async def one(i: int) -> None:
        async with sem:
            await sink.write(rec, "a2a_send", {"peer_url": "http://127.0.0.1:1/", "i": i})

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(lines)))
    return lines / (time.perf_counter() - t0)


async def main(args: argparse.Namespace) -> None:
    ex = BlockingExecutor()
    base = Path(tempfile.mkdtemp(prefix="roost-bench-trace-"))
    jobs = {
        f"job_{i:032x}": SimpleNamespace(
            job_id=f"job_{i:032x}", workdir="/x", parent_workdir=None, uid=None, node=None, session_id=f"ses_{i}"
        )
        for i in range(500)
    }
    double = NodeDouble()
    results: dict[str, list[float]] = {"local": [], "local+nodes": [], "remote": []}
    batches: list[int] = []
    for r in range(args.rounds):
        for variant in ("local", "local+nodes", "remote") if r % 2 == 0 else ("remote", "local+nodes", "local"):
            wd = base / f"{variant}-{r}"
            wd.mkdir()
            rec = SimpleNamespace(session_id=f"ses_r{r}", workdir=str(wd), uid=None, job_id=None)
            if variant == "local":
                sink = TraceFiles(ex, None)
            elif variant == "local+nodes":
                sink = TraceFiles(ex, JobNodes(double, lambda: jobs))  # type: ignore[arg-type]
            else:
                node = NodeDouble(ChildDir("job_remote", str(wd), None, None, NodeRef("n1", "10.0.0.2")))
                sink = TraceFiles(ex, node)
            results[variant].append(await _write(sink, rec, args.lines, args.writers))
            if variant == "remote":
                batches.append(node.batches)
            await sink.close_all()
    ex.shutdown()
    med = {k: statistics.median(v) for k, v in results.items()}
    for k, v in med.items():
        print(f"{k:12s} {v:10.0f} lines/s   rounds: {', '.join(f'{x:.0f}' for x in results[k])}")
    print(f"local+nodes / local = {med['local+nodes'] / med['local']:.3f}   (target ~1.0)")
    print(f"remote / local      = {med['remote'] / med['local']:.3f}")
    print(f"remote batches per {args.lines} lines: median {statistics.median(batches):.0f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--lines", type=int, default=3000)
    p.add_argument("--writers", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(p.parse_args()))

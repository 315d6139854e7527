"""``max_workdir_bytes``: six 15 MiB files under a 16 MiB ``max_file_size_bytes`` all landed before;
a cap on what the job holds stops the writer (eventually: within a measuring period)."""

from __future__ import annotations

import os
from pathlib import Path

from roost.capsule.writecap import bytes_under, over_sentence
from tests.support.capsules import Capsules, base_env
from tests.support.registry import RegistryBuilder

WRITER = r"""
import os, sys, time
sys.stdin.read()
os.makedirs("out", exist_ok=True)
for i in range(6):
    with open(f"out/chunk-{i}", "wb") as f:
        f.write(b"x" * (15 << 20))
    time.sleep(1.5)
print("wrote all six")
"""


async def test_a_job_over_its_workdir_cap_is_stopped(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    registry.add(
        "writer",
        script=WRITER,
        capabilities={"resources": {"max_file_size_bytes": "16Mi", "max_workdir_bytes": "32Mi"}},
        extra={"lifecycle": {"after_task": "exit"}},
    )
    work = tmp_path / "w"
    work.mkdir()
    (work / "task.md").write_text("go")
    cp = await capsules.start("writer@0.1.0", work, registry=registry.root, env=base_env())
    await cp.wait(within=60)
    result = (work / "out" / "result.txt").read_text()
    assert "over capabilities.resources.max_workdir_bytes (33554432)" in result, result
    assert "wrote all six" not in result
    chunks = sorted(p.name for p in (work / "out").iterdir() if p.name.startswith("chunk-"))
    assert len(chunks) < 6, chunks


def test_bytes_under_counts_files_not_links_nor_records(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 10)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"y" * 5)
    (tmp_path / ".murmur").mkdir()
    (tmp_path / ".murmur" / "trace.jsonl").write_bytes(b"z" * 100)
    os.symlink("/etc/passwd", tmp_path / "link")
    assert bytes_under(tmp_path) == 15
    assert "15 bytes" in over_sentence(15, 10)

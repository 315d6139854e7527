"""The pure half of per-job cgroups, and limit files written to a directory of our own."""

from __future__ import annotations

from pathlib import Path

from roost.backends.process.cgroups import cgroup_limits, find_v2_mount, own_cgroup, write_limits
from roost.core.manifest import ResourceCaps

MOUNTS = """tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""


def test_find_the_v2_mount_and_our_place() -> None:
    assert find_v2_mount(MOUNTS) == "/sys/fs/cgroup/unified"
    assert find_v2_mount("proc /proc proc rw 0 0\n") is None
    assert find_v2_mount("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n") == "/sys/fs/cgroup"
    assert own_cgroup("4:memory:/x\n0::/system.slice/mur-roost.service/daemon\n") == (
        "/system.slice/mur-roost.service/daemon"
    )
    assert own_cgroup("0::/\n") == "/"
    assert own_cgroup("4:memory:/x\n") is None


def test_limits_follow_the_enabled_controllers() -> None:
    caps = ResourceCaps(address_space_bytes=64 * 1024 * 1024, max_processes=32, cpu_percent=50)
    assert cgroup_limits(caps, frozenset({"memory", "pids", "cpu"})) == {
        "memory.max": str(64 * 1024 * 1024),
        "pids.max": "32",
        "cpu.max": "50000 100000",
    }
    assert cgroup_limits(caps, frozenset({"pids"})) == {"pids.max": "32"}
    assert cgroup_limits(caps, frozenset()) == {}
    assert cgroup_limits(ResourceCaps(memory_bytes=1000, address_space_bytes=5000), frozenset({"memory"})) == {
        "memory.max": "1000"
    }


def test_limit_files_are_written(tmp_path: Path) -> None:
    for name in ("memory.max", "pids.max", "cpu.max"):
        (tmp_path / name).write_text("max\n")
    limits = cgroup_limits(
        ResourceCaps(memory_bytes=1 << 20, max_processes=8, cpu_percent=25), frozenset({"memory", "pids", "cpu"})
    )
    assert write_limits(tmp_path, limits) == []
    assert (tmp_path / "memory.max").read_text() == str(1 << 20)
    assert (tmp_path / "pids.max").read_text() == "8"
    assert (tmp_path / "cpu.max").read_text() == "25000 100000"
    (tmp_path / "pids.max").unlink()
    assert write_limits(tmp_path, {"pids.max": "8"}) == ["pids.max"]

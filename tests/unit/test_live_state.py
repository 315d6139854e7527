"""The holders of live state: a reload swaps the configuration and registry inside ``Settings``, a
rotation swaps the key ring inside ``KeyHolder``; whoever holds them sees the new state at once."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from a2a.protocol import seal
from roost.state.config import Config, ConfigError
from roost.state.keys import KEY_FILE_NAME, KeyHolder, KeyRing
from roost.state.settings import RESTART_ONLY, Settings, merge
from roost.system.blocking import BlockingExecutor


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    pool = BlockingExecutor()
    yield pool
    pool.shutdown()


def _entries(path: Path) -> list[Path]:
    return list(path.iterdir())


def config(tmp_path: Path, **values: object) -> Config:
    base: dict[str, object] = {"state_dir": tmp_path / "state", "registry_path": tmp_path / "registry"}
    return Config.model_validate({**base, **values})


def test_merge_keeps_restart_only_settings_and_names_them(tmp_path: Path) -> None:
    old = config(tmp_path, port=7700)
    new = config(tmp_path, port=7800, max_depth=2)
    merged, kept = merge(old, new)
    assert kept == ["port"]
    assert merged.port == 7700 and merged.max_depth == 2
    assert merge(old, config(tmp_path, port=7700)) == (config(tmp_path, port=7700), [])
    assert "port" in RESTART_ONLY and "max_depth" not in RESTART_ONLY


async def test_reload_swaps_config_and_registry_in_place(tmp_path: Path, executor: BlockingExecutor) -> None:
    settings = Settings(config(tmp_path), executor=executor)
    first_registry = settings.registry
    forgotten: list[str] = []
    settings.on_reload.append(lambda: forgotten.append("resolved"))
    settings.loader = lambda: config(tmp_path, max_depth=1, registry_path=tmp_path / "other", port=1)
    answer = await settings.reload()
    assert answer["reloaded"] is True and answer["needs_restart"] == ["port"]
    assert sorted(answer["changed"]) == ["max_depth", "registry_path"]
    assert settings.config.max_depth == 1 and settings.config.port == config(tmp_path).port
    assert settings.registry is not first_registry
    assert forgotten == ["resolved"]
    # Unchanged registry path: the same registry object stays, only its caches are forgotten.
    same = settings.registry
    await settings.reload()
    assert settings.registry is same and forgotten == ["resolved", "resolved"]


async def test_a_failed_reload_keeps_what_is_in_force(tmp_path: Path, executor: BlockingExecutor) -> None:
    before = config(tmp_path, max_depth=3)
    settings = Settings(before, executor=executor)

    def broken() -> Config:
        raise ConfigError("config file: line 1: expected '='")

    settings.loader = broken
    answer = await settings.reload()
    assert answer["reloaded"] is False and answer["error"] == "config file: line 1: expected '='"
    assert settings.config is before


async def test_reload_without_a_loader_only_forgets_caches(tmp_path: Path, executor: BlockingExecutor) -> None:
    before = config(tmp_path)
    settings = Settings(before, executor=executor)
    calls: list[int] = []
    settings.on_reload.append(lambda: calls.append(1))
    assert await settings.reload() == {"reloaded": True, "changed": [], "needs_restart": []}
    assert settings.config is before and calls == [1]


async def test_rotation_swaps_the_ring_and_the_key_file(tmp_path: Path, executor: BlockingExecutor) -> None:
    holder = KeyHolder(KeyRing.ephemeral(), state_dir=tmp_path, executor=executor)
    await holder.load()
    loaded = holder.ring
    assert (tmp_path / KEY_FILE_NAME).read_bytes() and holder.persisted
    door = holder.door_key_for("ses_a")
    old, new = await holder.rotate()
    assert old is loaded and new is holder.ring and new.key_id != old.key_id
    assert KeyRing.load_or_create(tmp_path).key_id == new.key_id
    assert stat.S_IMODE((tmp_path / KEY_FILE_NAME).stat().st_mode) == 0o600
    assert holder.door_key_for("ses_a") != door, "a door key derives from the ring in force"
    assert holder.door_key_for("ses_a") == holder.door_key_for("ses_a")
    # every key, cached or not, is the one the session's door derives from the ring in force
    for sid in ("ses_a", "ses_b", "ses_a"):
        assert holder.door_key_for(sid) == seal.door_key(new.subkey("door-seal"), sid)
    assert holder.door_key_for("ses_b") != holder.door_key_for("ses_a")


async def test_door_keys_cached_are_bounded(tmp_path: Path, executor: BlockingExecutor) -> None:
    holder = KeyHolder(KeyRing.ephemeral(), state_dir=None, executor=executor)
    master = holder.ring.subkey("door-seal")
    for i in range(2 * 4096 + 3):
        assert holder.door_key_for(f"ses_{i}") == seal.door_key(master, f"ses_{i}")
    assert len(holder._door_keys) <= 4096


async def test_ephemeral_rotation_writes_nothing(tmp_path: Path, executor: BlockingExecutor) -> None:
    first = KeyRing.ephemeral()
    holder = KeyHolder(first, state_dir=None, executor=executor)
    await holder.load()
    assert holder.ring is first and not holder.persisted
    old, new = await holder.rotate()
    assert old is first and holder.ring is new and new.key_id != first.key_id
    assert _entries(tmp_path) == []


def test_a_reload_keeps_the_process_backend_and_its_cluster(tmp_path: Path) -> None:
    """The backend is built once: its kind and its cluster's address, namespace and node root
    need a restart (reload names them and keeps them in force)."""
    old = config(tmp_path, launcher="ray", ray_address="10.0.0.1:6379", ray_namespace="a")
    new = config(
        tmp_path,
        launcher="local",
        ray_address="10.0.0.2:6379",
        ray_namespace="b",
        ray_node_root=tmp_path / "n",
        ray_busy_wait_secs=5.0,
    )
    merged, kept = merge(old, new)
    assert kept == ["launcher", "ray_address", "ray_namespace", "ray_node_root"]
    assert (merged.launcher, merged.ray_address, merged.ray_namespace, merged.ray_node_root) == (
        "ray",
        "10.0.0.1:6379",
        "a",
        None,
    )
    assert merged.ray_busy_wait_secs == 5.0  # this one the backend reads at each launch


async def test_the_ray_backend_places_by_the_settings_in_force(tmp_path: Path, executor: BlockingExecutor) -> None:
    pytest.importorskip("ray")
    from roost.backends.ray.backend import RayBackend
    from roost.core.manifest import ResourceCaps

    first = config(tmp_path, launcher="ray", ray_placement={"worker": {"resources": {"w1": 1}}})
    live = {"config": first}
    backend = RayBackend(first, executor, live=lambda: live["config"])
    assert backend.bundle_of("worker@0.1.0", ResourceCaps()).resources.get("w1") == 1
    live["config"] = config(
        tmp_path, launcher="ray", ray_placement={"worker": {"resources": {"w2": 2}}}, ray_child_cpus=0.5
    )
    bundle = backend.bundle_of("worker@0.1.0", ResourceCaps())
    assert "w1" not in bundle.resources and bundle.resources.get("w2") == 2 and bundle.resources["CPU"] == 0.5

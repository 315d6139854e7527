"""The seam between the daemon and its process backend (roost/backends/choose.py, bundle.py).

The chooser knows every ``launcher`` name and imports only the package asked for; each package
builds all of its services; the daemon's composition root names no backend; and a backend's own
configuration keys are read only by its package.
"""

from __future__ import annotations

import ast
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from roost.backends import choose
from roost.backends.bundle import BackendNeeds
from roost.backends.choose import BACKENDS, Backend, choose_backend
from roost.backends.local.backend import LocalBackend
from roost.backends.local.sessionfiles import LocalSessionFiles
from roost.state.config import LAUNCHERS, Config, ConfigError
from roost.state.sessions import SessionTable
from roost.system.blocking import BlockingExecutor

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    pool = BlockingExecutor()
    yield pool
    pool.shutdown()


def _needs(tmp_path: Path, executor: BlockingExecutor, **values: object) -> BackendNeeds:
    config = Config.model_validate({"state_dir": tmp_path / "state", "registry_path": tmp_path / "reg", **values})
    return BackendNeeds(
        config=config,
        live=lambda: config,
        executor=executor,
        table=SessionTable(),
        jobs=dict,
        daemon_url=lambda: "http://127.0.0.1:7700",
        node_token=lambda node_id: f"token-of-{node_id}",
    )


def test_every_launcher_name_has_a_backend_and_no_other() -> None:
    assert tuple(BACKENDS) == LAUNCHERS
    for name, backend in BACKENDS.items():
        assert backend.module.startswith(f"roost.backends.{name}."), name
        assert (ROOT / (backend.module.replace(".", "/") + ".py")).is_file(), backend.module


async def test_the_local_backend_serves_everything_on_this_host(tmp_path: Path, executor: BlockingExecutor) -> None:
    got = choose_backend(_needs(tmp_path, executor))
    assert isinstance(got.process, LocalBackend) and isinstance(got.session_files, LocalSessionFiles)
    assert got.door_route is None and got.node_traces is None
    # The workdir check runs on this host: a directory of the daemon's own uid is accepted.
    (tmp_path / "wd").mkdir()
    assert await got.check_workdir(str(tmp_path / "wd" / "."), os.geteuid(), None) == str(tmp_path / "wd")


async def test_the_ray_backend_reaches_each_sessions_node(tmp_path: Path, executor: BlockingExecutor) -> None:
    pytest.importorskip("ray")
    from roost.backends.jobnodes import JobNodes
    from roost.backends.ray.backend import RayBackend
    from roost.backends.ray.peerfiles import RaySessionFiles

    got = choose_backend(_needs(tmp_path, executor, launcher="ray", ray_node_root=tmp_path / "nodes"))
    assert isinstance(got.process, RayBackend) and isinstance(got.session_files, RaySessionFiles)
    assert isinstance(got.node_traces, JobNodes) and got.door_route is not None
    assert got.process.cluster.node_root == str(tmp_path / "nodes")


async def test_a_backend_whose_extra_is_missing_is_one_sentence(
    tmp_path: Path, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(choose.BACKENDS, "ray", Backend("roost.backends.ray.not_installed", extra="ray"))
    with pytest.raises(ConfigError) as refused:
        choose_backend(_needs(tmp_path, executor, launcher="ray"))
    assert str(refused.value) == (
        'launcher = "ray" needs the Ray extra, which is not installed (roost.backends.ray.not_installed): '
        "pip install 'mur-roost[ray]'"
    )


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_the_composition_root_names_no_backend() -> None:
    for path in sorted((ROOT / "roost" / "daemon").glob("*.py")):
        backends = {m for m in _imports(path) if m.startswith("roost.backends")}
        assert backends <= {"roost.backends.bundle", "roost.backends.choose"}, (path.name, backends)
        text = path.read_text(encoding="utf-8")
        assert "launcher ==" not in text and '"ray"' not in text, path.name


def test_only_the_ray_package_reads_the_ray_keys() -> None:
    """The ``ray_*`` keys are declared with the whole configuration (roost/state/), and read
    only through the Ray package's own settings."""
    readers = []
    for path in sorted((ROOT / "roost").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("roost/state/", "roost/backends/ray/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("ray_"):
                readers.append(f"{rel}:{node.lineno} .{node.attr}")
    assert not readers, readers
    ray = ROOT / "roost" / "backends" / "ray"
    inside = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted(ray.rglob("*.py"))
        if path.name != "settings.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr.startswith("ray_")
    ]
    assert not inside, inside

"""roost.backends.ray.placement: a manifest's resources as a Ray bundle, and feasibility on node totals."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.backends.ray.placement import (
    Bundle,
    NodeView,
    bundle_for,
    busy_sentence,
    infeasible_sentence,
    keeper_name,
    node_root_name,
)
from roost.core.manifest import ResourceCaps
from roost.state.config import RayPlacement

MiB = 1024 * 1024


def node(nid: str, cpus: float, memory: float = 8 * 1024 * MiB, **custom: float) -> NodeView:
    return NodeView(node_id=nid, address="127.0.0.1", totals={"CPU": cpus, "memory": memory, **custom})


def test_cpu_percent_becomes_cpus_and_memory_bytes_memory() -> None:
    b = bundle_for(ResourceCaps(cpu_percent=250, memory_bytes=64 * MiB), None, 0.1)
    assert dict(b.resources) == {"CPU": 2.5, "memory": float(64 * MiB)}


def test_address_space_stands_for_memory_when_memory_is_not_declared() -> None:
    b = bundle_for(ResourceCaps(address_space_bytes=32 * MiB), None, 0.1)
    assert b.resources["memory"] == float(32 * MiB)


def test_no_declared_cpu_reserves_the_default_share() -> None:
    assert dict(bundle_for(ResourceCaps(), None, 0.25).resources) == {"CPU": 0.25}


def test_operator_placement_adds_custom_resources_and_labels_without_overriding_the_manifest() -> None:
    place = RayPlacement(resources={"gpu_box": 1, "CPU": 9}, labels={"zone": "a"})
    b = bundle_for(ResourceCaps(cpu_percent=50), place, 0.1)
    assert dict(b.resources) == {"CPU": 0.5, "gpu_box": 1.0}
    assert dict(b.labels) == {"zone": "a"}


def test_feasible_on_the_one_node_that_holds_everything() -> None:
    b = Bundle({"CPU": 4, "gpu_box": 1})
    assert infeasible_sentence(b, [node("a", 8), node("b", 2, gpu_box=1), node("c", 4, gpu_box=1)]) is None


def test_too_many_cpus_names_the_cpu_and_the_largest_node() -> None:
    msg = infeasible_sentence(Bundle({"CPU": 64}), [node("a", 8), node("b", 16)])
    assert msg is not None
    assert "64 CPU" in msg and "largest node has 16 CPU" in msg


def test_a_custom_resource_nobody_has_is_named() -> None:
    msg = infeasible_sentence(Bundle({"CPU": 1, "tpu": 1}), [node("a", 8)])
    assert msg is not None and "custom resource 'tpu'" in msg and "no node has any" in msg


def test_memory_is_shown_in_mib() -> None:
    msg = infeasible_sentence(Bundle({"CPU": 1, "memory": 1024 * MiB}), [node("a", 8, memory=512 * MiB)])
    assert msg is not None and "1024 MiB of memory" in msg and "512 MiB" in msg


def test_parts_that_fit_on_different_nodes_only_are_infeasible() -> None:
    msg = infeasible_sentence(Bundle({"CPU": 8, "gpu_box": 1}), [node("a", 8), node("b", 1, gpu_box=1)])
    assert msg is not None and "no single node" in msg


def test_a_label_no_node_carries_is_named() -> None:
    msg = infeasible_sentence(Bundle({"CPU": 1}, {"zone": "b"}), [NodeView("a", "x", {"CPU": 4}, {"zone": "a"})])
    assert msg is not None and "zone=b" in msg


def test_no_live_node_is_its_own_sentence() -> None:
    msg = infeasible_sentence(Bundle({"CPU": 0.1}), [])
    assert msg is not None and "no live node" in msg


def test_busy_sentence_names_what_was_asked_and_the_bound() -> None:
    msg = busy_sentence(Bundle({"CPU": 2, "w1": 1}), 3)
    assert "2 CPU" in msg and "'w1'" in msg and "3s" in msg and "ray_busy_wait_secs" in msg


def test_keeper_and_root_names_are_per_node() -> None:
    assert keeper_name("abc") != keeper_name("abd")
    assert node_root_name("abc") != node_root_name("abd")
    assert node_root_name("abc").startswith("node-") and len(node_root_name("abc")) == 21


def test_placement_config_refuses_a_non_positive_amount() -> None:
    with pytest.raises(ValueError, match="positive amount"):
        RayPlacement(resources={"w1": 0})


_names = st.sampled_from(["CPU", "memory", "w1", "w2"])
_amounts = st.floats(min_value=0.0, max_value=64.0, allow_nan=False)
_nodes = st.lists(st.dictionaries(_names, _amounts, max_size=4), max_size=4)
_bundles = st.dictionaries(_names, st.floats(min_value=0.0001, max_value=64.0, allow_nan=False), min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(_bundles, _nodes)
def test_feasible_exactly_when_some_node_covers_every_amount(
    wanted: dict[str, float], totals: list[dict[str, float]]
) -> None:
    nodes = [NodeView(f"n{i}", "127.0.0.1", t) for i, t in enumerate(totals)]
    msg = infeasible_sentence(Bundle(wanted), nodes)
    covered = any(all(t.get(k, 0.0) >= v for k, v in wanted.items()) for t in totals)
    assert (msg is None) == covered
    if msg is not None and nodes:
        # The sentence names a resource of the bundle, or says no single node holds them all.
        assert "no single node" in msg or any(k in msg for k in ("CPU", "memory", "'w1'", "'w2'"))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=1, max_value=100_000) | st.none(),
    st.integers(min_value=1, max_value=2**40) | st.none(),
    st.floats(min_value=0.0001, max_value=16, allow_nan=False),
)
def test_a_bundle_always_reserves_some_cpu(cpu_percent: int | None, memory: int | None, default: float) -> None:
    b = bundle_for(ResourceCaps(cpu_percent=cpu_percent, memory_bytes=memory), None, default)
    assert b.resources["CPU"] > 0
    if cpu_percent is not None:
        assert b.resources["CPU"] >= cpu_percent / 100
    assert ("memory" in b.resources) == (memory is not None)


def test_the_daemon_imports_no_ray_unless_asked() -> None:
    """Users who never ask for Ray pay nothing for it: the daemon, the CLIs and the pure parts of
    the Ray backend import without loading ``ray``."""
    import subprocess
    import sys

    code = (
        "import sys, roost.daemon.serve, roost.cli, roost.ctl.main;"
        "import roost.backends.ray.placement, roost.backends.ray.node.keeper;"
        "sys.exit(1 if 'ray' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_config_takes_the_ray_keys_from_toml_and_the_launcher_flag(tmp_path: Any) -> None:
    from roost.cli import UsageError, parse_args
    from roost.state.config import ConfigError, build_config, load_toml

    toml = tmp_path / "roost.toml"
    toml.write_text(
        'launcher = "ray"\nray_address = "auto"\nray_namespace = "fleet"\nray_node_root = "nodes"\n'
        '[ray_placement.worker]\nresources = { w1 = 1 }\nlabels = { zone = "a" }\n'
    )
    values = load_toml(toml)
    cfg = build_config({"state_dir": tmp_path, "registry_path": tmp_path, **values})
    assert cfg.launcher == "ray" and cfg.ray_address == "auto" and cfg.ray_namespace == "fleet"
    assert cfg.ray_node_root == tmp_path / "nodes"
    assert dict(cfg.ray_placement["worker"].resources) == {"w1": 1.0}
    assert build_config({"state_dir": tmp_path, "registry_path": tmp_path}).launcher == "local"
    assert parse_args(["--launcher", "ray"])[1]["launcher"] == "ray"
    with pytest.raises(UsageError, match="not one of local, ray"):
        parse_args(["--launcher", "k8s"])
    with pytest.raises(ConfigError, match="ray-namespace"):
        build_config({"state_dir": tmp_path, "registry_path": tmp_path, "ray_namespace": "a b"})

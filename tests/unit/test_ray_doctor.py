"""roostctl doctor's cluster findings from a ``GET /cluster`` report (the pure part)."""

from __future__ import annotations

from roost.ctl.commands.doctor import cluster_findings


def test_an_unreachable_cluster_fails_with_the_fix() -> None:
    found = cluster_findings({"launcher": "ray", "address": "10.0.0.1:6379", "connected": False, "error": "timeout"})
    assert found == [
        (
            "ray-cluster",
            "fail",
            "the Ray cluster (10.0.0.1:6379) is not reachable: timeout",
            "start it (ray start --head) or fix ray_address in roost.toml; the daemon keeps retrying",
        )
    ]


def test_each_node_is_checked_for_its_keeper() -> None:
    report = {
        "connected": True,
        "address": "embedded",
        "available": {"CPU": 3.5},
        "nodes": [
            {"node_id": "a" * 56, "address": "10.0.0.2", "keeper": None},
            {"node_id": "b" * 56, "address": "10.0.0.3", "keeper": {"error": "actor died"}},
            {"node_id": "c" * 56, "address": "10.0.0.4", "keeper": {"capsule_host": False}},
            {
                "node_id": "d" * 56,
                "address": "10.0.0.5",
                "keeper": {"capsule_host": True, "pid": 7, "children": 2, "artifacts": 1, "root": "/n"},
            },
        ],
    }
    found = cluster_findings(report)
    assert [(c, s) for c, s, _, _ in found] == [
        ("ray-cluster", "ok"),
        ("ray-node aaaaaaaaaaaa", "ok"),
        ("ray-node bbbbbbbbbbbb", "fail"),
        ("ray-node cccccccccccc", "fail"),
        ("ray-node dddddddddddd", "ok"),
    ]
    assert "4 live node(s), 3.5 CPU free" in found[0][2]
    assert "roost-capsule is not installed" in found[3][2]
    assert "2 children, 1 cached artifact(s) in /n" in found[4][2]


def test_no_free_cpu_is_a_warning() -> None:
    found = cluster_findings({"connected": True, "available": {"CPU": 0}, "nodes": [{"node_id": "x", "keeper": None}]})
    assert found[0][1] == "warn"

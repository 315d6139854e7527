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
            "start the head there (on 10.0.0.1: ray start --head --port 6379) and check that the daemon's host "
            "reaches 10.0.0.1:6379, or fix ray_address in roost.toml; the daemon keeps retrying and refuses "
            "launches until it answers",
        )
    ]


def test_the_fix_follows_how_the_cluster_is_named() -> None:
    def fix(address: str) -> str:
        return cluster_findings({"address": address, "connected": False})[0][3]

    assert fix("embedded").startswith("the daemon's own Ray (ray_address unset) did not start")
    assert fix("auto").startswith("start Ray on the daemon's host (ray start --head)")
    assert "on head.example: ray start --head --port 6379" in fix("ray://head.example:6379")
    assert fix("nonsense").startswith("fix ray_address in roost.toml ('nonsense' is not host:port)")


def test_a_connected_cluster_that_stopped_answering_fails() -> None:
    found = cluster_findings({"address": "10.0.0.1:6379", "connected": True, "error": "deadline exceeded", "nodes": []})
    assert [(c, s) for c, s, _, _ in found] == [("ray-cluster", "fail")]
    assert "did not answer the daemon's query: deadline exceeded" in found[0][2]
    assert "head (GCS) at 10.0.0.1:6379" in found[0][3]


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

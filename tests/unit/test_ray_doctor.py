"""roostctl doctor's cluster findings from a ``GET /cluster`` report (the pure part)."""

from __future__ import annotations

from typing import Any

from roost.ctl.commands.doctor import cluster_findings, limits_findings


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


def _keeper(**more: object) -> dict[str, object]:
    """A keeper's answer as roost/backends/ray/node/keeper.py gives it, everything well."""
    keeper: dict[str, object] = {
        "pid": 7,
        "children": 2,
        "root": "/n",
        "commands": {
            "capsule": {
                "argv": ["@python", "-m", "roost.capsule"],
                "found": "/usr/bin/python3",
                "version": "roost-capsule 0.1.0",
                "error": None,
            },
            "runtime": {"argv": ["mur", "run"], "found": "/usr/bin/mur", "version": None, "error": None},
        },
        "cache": {"dir": "/n/registry", "count": 1, "bytes": 3 * 2**20, "writable": True, "mismatched": []},
    }
    keeper.update(more)
    return keeper


def _node(letter: str, keeper: object) -> dict[str, object]:
    return {"node_id": letter * 56, "address": "10.0.0.9", "keeper": keeper}


def _findings(*nodes: dict[str, object], version: str = "0.1.0") -> dict[str, tuple[str, str, str]]:
    report = {
        "connected": True,
        "address": "embedded",
        "available": {"CPU": 3.5},
        "version": version,
        "nodes": list(nodes),
    }
    return {check: (status, detail, fix) for check, status, detail, fix in cluster_findings(report)}


def test_each_node_is_checked_for_its_keeper() -> None:
    found = _findings(_node("a", None), _node("b", {"error": "actor died"}), _node("d", _keeper()))
    assert found["ray-cluster"][:2] == ("ok", "embedded: 3 live node(s), 3.5 CPU free")
    # A node without a keeper is a note: nothing was checked there, and doctor says so.
    assert found["ray-node aaaaaaaaaaaa"] == (
        "note",
        "10.0.0.9: no keeper yet, so nothing was checked there (the first child placed there starts one)",
        "",
    )
    assert found["ray-node bbbbbbbbbbbb"][0] == "fail"
    assert "does not answer: actor died" in found["ray-node bbbbbbbbbbbb"][1]
    # Neither has anything more checked (no keeper answered there).
    assert [c for c in found if c.startswith(("ray-node a", "ray-node b"))] == [
        "ray-node aaaaaaaaaaaa",
        "ray-node bbbbbbbbbbbb",
    ]
    assert found["ray-node dddddddddddd"] == ("ok", "10.0.0.9: keeper alive (pid 7), 2 children, root /n", "")
    assert found["ray-node dddddddddddd roost-capsule"] == (
        "ok",
        "10.0.0.9: @python -m roost.capsule runs there (/usr/bin/python3): roost-capsule 0.1.0",
        "",
    )
    assert found["ray-node dddddddddddd mur-runtime"][0] == "ok"
    assert found["ray-node dddddddddddd artifact-cache"] == (
        "ok",
        "10.0.0.9: 1 cached artifact(s), 3.0 MiB in /n/registry",
        "",
    )


def test_a_capsule_command_that_does_not_run_on_a_node_fails_with_the_fix() -> None:
    broken = {
        "argv": ["/opt/roost/bin/roost-capsule"],
        "found": None,
        "version": None,
        "error": "/opt/roost/bin/roost-capsule does not exist or is not executable on this node",
    }
    keeper = _keeper()
    keeper["commands"] = {**keeper["commands"], "capsule": broken}  # type: ignore[dict-item]
    status, detail, fix = _findings(_node("e", keeper))["ray-node eeeeeeeeeeee roost-capsule"]
    assert status == "fail"
    assert detail == (
        "10.0.0.9: the capsule command (/opt/roost/bin/roost-capsule) does not run there: "
        "/opt/roost/bin/roost-capsule does not exist or is not executable on this node"
    )
    assert fix == (
        "install mur-roost 0.1.0 on that node (pip install mur-roost==0.1.0) so that "
        "'/opt/roost/bin/roost-capsule --version' runs there, or set capsule_command in roost.toml "
        "to a command every node has"
    )


def test_another_version_missing_runtime_and_a_damaged_or_readonly_cache() -> None:
    keeper = _keeper()
    commands = dict(keeper["commands"])  # type: ignore[call-overload]
    commands["capsule"] = {**commands["capsule"], "version": "roost-capsule 0.0.9"}
    commands["runtime"] = {"argv": ["mur", "run"], "found": None, "version": None, "error": "mur is not on PATH"}
    keeper["commands"] = commands
    keeper["cache"] = {
        "dir": "/n/registry",
        "count": 2,
        "bytes": 0,
        "writable": True,
        "mismatched": ["a/1/a-1.mur.zip"],
    }
    found = _findings(_node("f", keeper))
    assert found["ray-node ffffffffffff roost-capsule"][0] == "warn"
    assert "the daemon is mur-roost 0.1.0" in found["ray-node ffffffffffff roost-capsule"][1]
    assert found["ray-node ffffffffffff mur-runtime"][0] == "warn"
    assert "needed only for capsules without an entrypoint" in found["ray-node ffffffffffff mur-runtime"][1]
    status, detail, fix = found["ray-node ffffffffffff artifact-cache"]
    assert status == "warn" and "1 no longer match their recorded sha256: a/1/a-1.mur.zip" in detail
    assert fix.startswith("remove them from /n/registry")
    keeper["cache"] = {"dir": "/n/registry", "count": 0, "bytes": 0, "writable": False, "mismatched": []}
    status, detail, fix = _findings(_node("f", keeper))["ray-node ffffffffffff artifact-cache"]
    assert status == "fail" and "the keeper cannot write there" in detail
    assert fix.startswith("make /n/registry writable")


def test_no_free_cpu_is_a_warning() -> None:
    found = cluster_findings({"connected": True, "available": {"CPU": 0}, "nodes": [{"node_id": "x", "keeper": None}]})
    assert found[0][1] == "warn"


def test_each_node_says_what_enforces_each_resource_limit_there() -> None:
    """The keeper's own answer (roost/backends/process/joblimits.py on its node): a limit nothing
    there enforces is a warning, refused under ``enforce`` and run unenforced under ``advisory``."""
    keeper = _keeper()
    keeper["resource_limits"] = {
        "cpu_seconds": "rlimit RLIMIT_CPU",
        "cgroup_pids_max": "cgroup v1 pids",
        "cgroup_memory_bytes": None,
    }
    report = {"connected": True, "available": {"CPU": 1}, "nodes": [_node("g", keeper)]}
    by_mode = {
        mode: {c: (s, d, f) for c, s, d, f in cluster_findings(report, mode)}["ray-node gggggggggggg resource-limits"]
        for mode in ("enforce", "advisory")
    }
    status, detail, fix = by_mode["enforce"]
    assert status == "warn"
    assert detail.startswith("a launch declaring cgroup_memory_bytes is refused on 10.0.0.9"), detail
    assert "cgroup_pids_max by cgroup v1 pids" in detail
    assert fix.startswith("give the node's Ray") and 'resource_limits = "advisory"' in fix
    status, detail, fix = by_mode["advisory"]
    assert status == "warn" and detail.startswith("not enforced on 10.0.0.9: cgroup_memory_bytes"), detail
    keeper["resource_limits"] = {"cpu_seconds": "rlimit RLIMIT_CPU"}
    found = {c: s for c, s, _d, _f in cluster_findings(report)}
    assert found["ray-node gggggggggggg resource-limits"] == "ok"


def test_with_ray_the_daemons_own_limits_finding_points_at_the_nodes() -> None:
    status: Any = {"resource_limits": {"mode": "enforce", "mechanisms": None}}
    ((check, state, detail, _fix),) = limits_findings(status, "ray")
    assert (check, state) == ("resource-limits", "note")
    assert "each node's keeper enforces their limits there" in detail
    assert "does not say" in limits_findings(status, "local")[0][2]

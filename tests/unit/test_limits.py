"""The limits policy (roost/core/limits.py): names, aliases, mechanisms, refusals, evidence."""

from __future__ import annotations

import signal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.core.limits import (
    CGROUP_FIELDS,
    KNOWN_RESOURCE_FIELDS,
    RLIMIT_FIELDS,
    HostMechanisms,
    declared,
    plan_limits,
    refusal,
    which_limit,
)
from roost.core.manifest import ManifestError, ResourceCaps, parse_manifest
from roost.state.registry.packing import PackError


def caps(**kw: object) -> ResourceCaps:
    return ResourceCaps.model_validate(kw)


def test_the_seed_names_and_the_aliases_are_one_field() -> None:
    assert caps(cgroup_pids_max=20).pids_limit == 20
    assert caps(max_processes=20).pids_limit == 20
    assert caps(cgroup_memory_bytes="64Mi").memory_limit == 64 * 2**20
    assert caps(memory_bytes="64Mi").memory_limit == 64 * 2**20
    assert [(d.field, d.name) for d in declared(caps(max_processes=3, cgroup_memory_bytes=9))] == [
        ("cgroup_memory_bytes", "cgroup_memory_bytes"),
        ("cgroup_pids_max", "max_processes"),
    ]


def test_an_alias_that_disagrees_is_refused_where_the_manifest_is_read() -> None:
    with pytest.raises(ManifestError, match="max_processes is an alias of cgroup_pids_max"):
        parse_manifest("name: a\nversion: 0.1.0\ncapabilities:\n  resources: {cgroup_pids_max: 3, max_processes: 4}\n")
    assert caps(cgroup_pids_max=3, max_processes=3).pids_limit == 3


def test_unknown_keys_are_kept_not_dropped() -> None:
    c = caps(cpu_seconds=1, gpu_count=2, zz=1)
    assert c.unknown_keys == ["gpu_count", "zz"]
    assert set(KNOWN_RESOURCE_FIELDS) >= {"cgroup_pids_max", "max_processes", "memory_bytes", "cpu_seconds"}


HYBRID = HostMechanisms(cgroup1=frozenset({"pids", "memory"}))


def test_mechanisms_are_tried_best_first() -> None:
    both = HostMechanisms(cgroup2=frozenset({"pids"}), cgroup1=frozenset({"pids", "memory"}))
    assert both.mechanism("cgroup_pids_max") == "cgroup v2 pids"
    assert both.mechanism("cgroup_memory_bytes") == "cgroup v1 memory"
    assert both.mechanism("cpu_percent") is None
    assert both.mechanism("cpu_seconds") == "rlimit RLIMIT_CPU"
    assert both.mechanism("nonsense") is None


def test_a_plan_splits_the_cgroup_versions_and_refuses_under_enforce() -> None:
    plan = plan_limits(caps(max_processes=20, memory_bytes=99, cpu_percent=50, cpu_seconds=5), HYBRID, "enforce")
    assert plan.enforced == {
        "cpu_seconds": "rlimit RLIMIT_CPU",
        "memory_bytes": "cgroup v1 memory",
        "max_processes": "cgroup v1 pids",
    }
    assert plan.cgroup1 == {"cgroup_memory_bytes": 99, "cgroup_pids_max": 20}
    assert set(plan.not_enforced) == {"cpu_percent"}
    sentence = refusal(plan, "w@0.1.0")
    assert sentence is not None
    assert sentence.startswith("w@0.1.0 declares capabilities.resources.cpu_percent, which this host cannot enforce")
    assert "cpu controller" in sentence and 'resource_limits = "advisory"' in sentence
    advisory = plan_limits(caps(cpu_percent=50), HYBRID, "advisory")
    assert refusal(advisory, "w@0.1.0") is None
    assert advisory.report()["not_enforced"] == {"cpu_percent": HYBRID.why_not("cpu_percent")}


def test_a_refusal_names_the_host_that_runs_the_child_and_who_needs_the_cgroup() -> None:
    """A Ray node decides with its own mechanisms: the sentence names it, not "this host"."""
    node = HostMechanisms(cgroup1=frozenset({"memory"}), where="Ray node abc", holder="the node keeper")
    plan = plan_limits(caps(cgroup_pids_max=20), node, "enforce")
    sentence = refusal(plan, "f@1", node)
    assert sentence is not None
    assert sentence.startswith(
        "f@1 declares capabilities.resources.cgroup_pids_max, which Ray node abc cannot enforce "
        "(Ray node abc gives the node keeper no pids controller: "
    ), sentence
    assert "give the node keeper a delegated cgroup with the pids controller" in sentence


def test_an_unknown_key_is_reported_never_refused_at_a_spawn() -> None:
    plan = plan_limits(caps(gpu_count=1), HostMechanisms(), "enforce")
    assert refusal(plan, "x@1") is None
    assert plan.not_enforced == {"gpu_count": "this daemon does not know the resource field 'gpu_count'"}


@given(
    st.dictionaries(st.sampled_from([*RLIMIT_FIELDS, *CGROUP_FIELDS]), st.integers(1, 100), max_size=7),
    st.frozensets(st.sampled_from(["pids", "memory", "cpu"])),
    st.frozensets(st.sampled_from(["pids", "memory", "cpu"])),
)
def test_every_declared_limit_is_either_enforced_or_listed(
    values: dict[str, int], v2: frozenset[str], v1: frozenset[str]
) -> None:
    host = HostMechanisms(cgroup2=v2, cgroup1=v1)
    plan = plan_limits(caps(**values), host, "enforce")
    assert set(plan.enforced) | set(plan.not_enforced) == set(values)
    assert not set(plan.enforced) & set(plan.not_enforced)
    for field in RLIMIT_FIELDS:
        if field in values:
            assert field in plan.enforced  # an rlimit is always there
    assert (refusal(plan, "c@1") is None) == (not plan.not_enforced)
    for field, controller in CGROUP_FIELDS.items():
        if field in values and field in plan.enforced:
            assert controller in v2 | v1
            assert (field in plan.cgroup2) == (controller in v2)
            assert (field in plan.cgroup1) == (controller not in v2)


def test_the_evidence_names_a_limit_only_when_it_names_exactly_one() -> None:
    fields = {"cpu_seconds", "max_file_size_bytes", "cgroup_pids_max", "cgroup_memory_bytes"}
    assert which_limit(fields, signal_number=signal.SIGXCPU) == "cpu_seconds"
    assert which_limit(fields, signal_number=signal.SIGXFSZ) == "max_file_size_bytes"
    assert which_limit(fields, signal_number=None, pids_hits=3) == "cgroup_pids_max"
    assert which_limit(fields, signal_number=signal.SIGKILL, oom_kills=1) == "cgroup_memory_bytes"
    assert which_limit(fields, signal_number=None, pids_hits=1, oom_kills=1) is None
    assert which_limit(fields, signal_number=signal.SIGKILL) is None
    assert which_limit({"cgroup_pids_max"}, signal_number=signal.SIGXCPU) is None  # not declared


def test_packing_refuses_an_unknown_resource_key(tmp_path: object) -> None:
    from pathlib import Path

    from roost.state.registry.packing import pack_capsule

    src = Path(str(tmp_path)) / "c"
    src.mkdir()
    (src / "murmur.yaml").write_text("name: c\nversion: 0.1.0\ncapabilities:\n  resources: {cpu_seconds: 1, gpus: 2}\n")
    with pytest.raises(PackError, match=r"capabilities\.resources\.gpus is not a resource limit this daemon knows"):
        pack_capsule(src, Path(str(tmp_path)) / "reg")

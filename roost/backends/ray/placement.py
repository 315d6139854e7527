"""Where a child may run on a Ray cluster: its resource bundle, and whether any node could hold it.

Pure (no I/O, no ``ray``): the daemon turns a manifest's ``capabilities.resources`` plus the
operator's per-capsule placement into one placement-group bundle, and refuses at once a bundle
no node of the cluster could ever hold — Ray itself would wait for it silently, forever. A
bundle some node could hold but none can hold *now* is "busy": the launch waits, bounded
(``ray_busy_wait_secs``), and the sentence for that lapse is made here too.

Ray's resource names: ``CPU`` (a count, fractions allowed), ``memory`` (bytes); operators add
their own custom resources (``ray start --resources='{"gpu_box": 1}'``) and node labels.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from roost.backends.process.spawn import setid_capable
from roost.core.manifest import ResourceCaps
from roost.state.config import RayPlacement

__all__ = [
    "Bundle",
    "NodeView",
    "bundle_for",
    "busy_sentence",
    "infeasible_sentence",
    "keeper_name",
    "node_root_name",
    "run_as_refusal",
    "setid_capable",
]

# Ray's own unit names, and how a sentence shows them.
CPU = "CPU"
MEMORY = "memory"
_MIN_CPU = 0.0001  # Ray keeps resource amounts to four decimal places


@dataclass(frozen=True, slots=True)
class Bundle:
    """One child's reservation: resource amounts and the node labels it must land on."""

    resources: Mapping[str, float]
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the daemon knows of a live node: its id, address, labels and *total* resources."""

    node_id: str
    address: str
    totals: Mapping[str, float]
    labels: Mapping[str, str] = field(default_factory=dict)


def _round_cpu(value: float) -> float:
    return max(_MIN_CPU, math.ceil(value * 10_000) / 10_000)


def bundle_for(caps: ResourceCaps, placement: RayPlacement | None, default_cpus: float) -> Bundle:
    """The bundle a child of a manifest with ``caps`` reserves.

    ``cpu_percent`` (percent of one CPU) becomes ``CPU``; ``cgroup_memory_bytes``/``memory_bytes`` (else
    ``address_space_bytes``, as the cgroup limit reads it) becomes ``memory``. A child that
    declares no CPU share still reserves ``default_cpus``, so the cluster's CPU count bounds how
    many children it runs. The operator's custom resources are added on top; a name the
    manifest already maps is not overridden by them.
    """
    cpus = caps.cpu_percent / 100 if caps.cpu_percent is not None else default_cpus
    resources: dict[str, float] = {CPU: _round_cpu(cpus)}
    memory = caps.memory_limit or caps.address_space_bytes
    if memory is not None:
        resources[MEMORY] = float(memory)
    labels: dict[str, str] = {}
    if placement is not None:
        for name, amount in placement.resources.items():
            resources.setdefault(name, float(amount))
        labels.update(placement.labels)
    return Bundle(resources=resources, labels=labels)


def _show(name: str, amount: float) -> str:
    if name == MEMORY:
        return f"{amount / (1024 * 1024):.0f} MiB of memory"
    if name == CPU:
        return f"{amount:g} CPU"
    return f"{amount:g} of the custom resource '{name}'"


def _fits(bundle: Bundle, node: NodeView) -> bool:
    if any(node.labels.get(k) != v for k, v in bundle.labels.items()):
        return False
    return all(node.totals.get(name, 0.0) + 1e-9 >= amount for name, amount in bundle.resources.items())


def infeasible_sentence(bundle: Bundle, nodes: Sequence[NodeView]) -> str | None:
    """None when some live node's totals could hold ``bundle``; else one sentence naming why.

    The sentence names the first thing no node has enough of (a label, then each resource in
    the bundle's order); when every part fits somewhere but no single node holds them all, it
    says so.
    """
    if not nodes:
        return "the Ray cluster has no live node, so no child can be placed on it"
    if any(_fits(bundle, n) for n in nodes):
        return None
    for key, value in bundle.labels.items():
        if not any(n.labels.get(key) == value for n in nodes):
            return (
                f"no node of the Ray cluster carries the label {key}={value}, which this capsule's "
                "placement asks for, so the child can never be placed"
            )
    for name, amount in bundle.resources.items():
        best = max(n.totals.get(name, 0.0) for n in nodes)
        if best + 1e-9 < amount:
            have = "no node has any" if best <= 0 else f"the largest node has {_show(name, best)}"
            return (
                f"no node of the Ray cluster could ever hold this child: it asks for {_show(name, amount)}, and {have}"
            )
    wanted = ", ".join(_show(k, v) for k, v in bundle.resources.items())
    return (
        f"no single node of the Ray cluster has all of {wanted} (and the labels asked for), "
        "so the child can never be placed"
    )


def busy_sentence(bundle: Bundle, waited_secs: float) -> str:
    """The refusal once a feasible bundle found no room within the bounded wait."""
    wanted = ", ".join(_show(k, v) for k, v in bundle.resources.items())
    return (
        f"the Ray cluster had no room for this child ({wanted}) within {waited_secs:g}s "
        "(ray_busy_wait_secs): every node that could hold it is busy; try again later"
    )


def keeper_name(node_id: str) -> str:
    """The detached keeper actor's name for a node (one per node, per namespace)."""
    return f"roost-keeper-{node_id}"


def node_root_name(node_id: str) -> str:
    """A node's own directory under ``ray_node_root``: several nodes on one machine never share one."""
    return "node-" + hashlib.sha256(node_id.encode()).hexdigest()[:16]


def run_as_refusal(node_id: str, uid: int | None, keeper_uid: int, can_switch: bool) -> str | None:
    """None when a node's keeper (running as ``keeper_uid``, root with CAP_SETUID/CAP_SETGID when
    ``can_switch``) can start a child as ``uid``; else the refusal sentence with its fix.

    As on the daemon's own host, only root switches users: a keeper of another uid starts
    children as that uid alone.
    """
    if uid is None or uid == keeper_uid or (keeper_uid == 0 and can_switch):
        return None
    if keeper_uid == 0:
        who = "as root without CAP_SETUID/CAP_SETGID"
        fix = "give that node's Ray those capabilities"
    else:
        who = f"as uid {keeper_uid}"
        fix = "start Ray on that node as root (with CAP_SETUID/CAP_SETGID)"
    return (
        f"the node keeper on Ray node {node_id} runs {who}, so it cannot start a child as uid {uid} "
        f"(the session's own); {fix}, or place this capsule on another node"
    )

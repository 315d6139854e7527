"""The Ray cluster and each of its nodes, as ``roostctl doctor`` checks them (``GET /cluster``).

Why its own module: a child on a node meets that node's interpreter, commands and artifact
cache, not this host's, so the doctor asks each node's keeper to check what a child there would
meet (roost/backends/ray/node/checks.py does the checking on the node). This gathers those answers,
each bounded in time, beside the cluster's own state; a node with no keeper yet is listed
without one (nothing was checked there).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import ray
from ray.exceptions import RayError

from roost import __version__
from roost.backends.ray.keepers import Keepers, cause, one_line
from roost.backends.ray.node.keeper import PYTHON_MARK
from roost.state.config import Config

__all__ = ["INFO_SECS", "cluster_report", "node_commands"]

INFO_SECS = 30.0
"""How long ``roostctl doctor``'s question to one keeper may take (it runs the capsule command
there with ``--version``)."""


def node_commands(cfg: Config) -> dict[str, list[str]]:
    """The capsule host's and the runtime's commands as a keeper would start them on its node
    (this host's interpreter becomes the node's own, as in ``RayBackend.start``)."""
    capsule = list(cfg.capsule_command) or [PYTHON_MARK, "-m", "roost.capsule"]
    if capsule[0] == sys.executable:
        capsule[0] = PYTHON_MARK
    return {"capsule": capsule, "runtime": list(cfg.runtime_command)}


async def cluster_report(keepers: Keepers, commands: dict[str, list[str]]) -> dict[str, Any]:
    """The cluster's address, connection and resources, and each node with its keeper's checks."""
    cluster = keepers.cluster
    out: dict[str, Any] = {
        "launcher": "ray",
        "address": cluster.address or "embedded",
        "namespace": cluster.namespace,
        "connected": cluster.connected,
        "error": cluster.last_error,
        "version": __version__,
        "nodes": [],
    }
    if not cluster.connected:
        return out
    try:
        nodes = await cluster.refresh_nodes(force=True)
        out["available"] = await keepers.executor.run(ray.available_resources)
        found = await cluster.existing_keepers()
    except Exception as exc:
        out["error"] = one_line(exc)
        return out
    path = os.environ.get("PATH", os.defpath)  # what children get (roost/backends/process/spawn.py)

    async def ask(handle: Any) -> dict[str, Any]:
        try:
            return dict(await asyncio.wait_for(keepers.call(handle.info, commands, path), INFO_SECS))
        except RayError as exc:
            return {"error": cause(exc)}
        except TimeoutError:
            return {"error": f"no answer in {INFO_SECS:g}s"}

    answers = await asyncio.gather(*(ask(found[n.node_id]) for n in nodes if n.node_id in found))
    by_node = dict(zip([n.node_id for n in nodes if n.node_id in found], answers, strict=True))
    for n in nodes:
        entry: dict[str, Any] = {"node_id": n.node_id, "address": n.address, "totals": dict(n.totals)}
        entry["keeper"] = by_node.get(n.node_id)
        out["nodes"].append(entry)
    return out

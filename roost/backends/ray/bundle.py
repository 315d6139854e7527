"""The Ray backend's services: children on Ray nodes, and what lives where they run.

What the chooser imports for ``launcher = "ray"`` (roost/backends/choose.py), and the first
import of Ray in the daemon. A session whose job runs on a node has its workdir, its trace and
its door there, so each of the daemon's services reaches them through that node's keeper: the
peer plane's files (:mod:`.peerfiles`), the trace sink's lines (roost/backends/jobnodes.py), the
A2A client's door route (:mod:`.doors`) and the referee's workdir check
(roost/backends/workdirplace.py). A session of this host (not a job, or one the daemon placed
nowhere) is served here as by the local backend.
"""

from __future__ import annotations

from roost.backends.bundle import BackendNeeds, BackendServices
from roost.backends.jobnodes import JobNodes
from roost.backends.local.sessionfiles import LocalSessionFiles
from roost.backends.ray.backend import RayBackend
from roost.backends.ray.doors import DoorRoutes
from roost.backends.ray.peerfiles import RaySessionFiles
from roost.backends.workdirplace import RegisteredWorkdirs

__all__ = ["bundle"]


def bundle(needs: BackendNeeds) -> BackendServices:
    config, executor, jobs = needs.config, needs.executor, needs.jobs
    process = RayBackend(config, executor, daemon_url=needs.daemon_url, keeper_token=needs.node_token, live=needs.live)
    nodes = JobNodes(process, jobs)
    timeout = config.peer_timeout_secs
    return BackendServices(
        process=process,
        session_files=RaySessionFiles(process, LocalSessionFiles(executor), jobs, timeout_secs=timeout),
        check_workdir=RegisteredWorkdirs(executor, process, jobs).check,
        door_route=DoorRoutes(process.doors, needs.table, nodes.remote_dir, timeout).route,
        node_traces=nodes,
    )

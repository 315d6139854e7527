"""The local backend's services: every child, file, trace and door on this host.

What the chooser imports for ``launcher = "local"`` (roost/backends/choose.py): the process
backend of this host, the session files of this host's disk, and the workdir check run here.
There is no door route and no node traces: the daemon dials every door and writes every trace
itself.
"""

from __future__ import annotations

from roost.backends.bundle import BackendNeeds, BackendServices
from roost.backends.local.backend import LocalBackend
from roost.backends.local.sessionfiles import LocalSessionFiles
from roost.backends.workdirplace import RegisteredWorkdirs

__all__ = ["bundle"]


def bundle(needs: BackendNeeds) -> BackendServices:
    config = needs.config
    process = LocalBackend(
        needs.executor, state_dir=config.state_dir, job_cgroups=config.job_cgroups, max_starting=config.max_starting
    )
    return BackendServices(
        process=process,
        session_files=LocalSessionFiles(needs.executor),
        check_workdir=RegisteredWorkdirs(needs.executor).check,
    )

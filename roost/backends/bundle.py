"""The seam between the daemon and a process backend: what a backend is built with, and what it
gives back.

Where a job's child runs decides more than how it is started. A session's files, its trace and
its door live where its child runs, and so does the disk its registered workdir is checked on:
for a backend whose children run on other machines, each of those is reached through the
backend. So a backend is not one object but five services, built together by the backend's own
package (its ``bundle`` function) from one :class:`BackendNeeds`, and handed to the daemon as
one :class:`BackendServices`; the daemon gives each part to the service that uses it and never
names a backend (roost/backends/choose.py picks the package; docs/architecture.md, "Process
backends").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from a2a.client import Route
from roost.backends.base import ProcessBackend
from roost.core.jobs import Job
from roost.observe.tracesink import NodeTraces
from roost.services.peer.files import SessionFiles
from roost.services.referee.registration import WorkdirCheck
from roost.state.config import Config
from roost.state.sessions import SessionTable
from roost.system.blocking import BlockingExecutor

__all__ = ["BackendNeeds", "BackendServices", "Bundler"]


@dataclass(frozen=True, slots=True)
class BackendNeeds:
    """What the daemon gives a backend package to build its services with.

    * ``config`` — the configuration at start (what needs a restart is read from it once);
      ``live`` — the configuration in force now (what a reload may change, read at each use).
    * ``table`` — the daemon's sessions; ``jobs`` — the launcher's jobs by id, read when asked
      (the launcher is built after the backend, from its process part).
    * ``daemon_url`` — the daemon's URL as children on other nodes reach it (``advertise_url``).
    * ``node_token`` — the token a node's agent presents to ``GET /artifacts/{sha256}`` for the
      node it names (a node keeper's ``mnk1`` token, roost/services/artifactserve.py).
    """

    config: Config
    live: Callable[[], Config]
    executor: BlockingExecutor
    table: SessionTable
    jobs: Callable[[], Mapping[str, Job]]
    daemon_url: Callable[[], str]
    node_token: Callable[[str], str]


@dataclass(frozen=True, slots=True)
class BackendServices:
    """Everything the daemon gets from the backend it runs, each part for one service.

    * ``process`` — starts, watches, stops and finishes off children and reads and writes their
      directories (roost/backends/base.py); the launcher's.
    * ``session_files`` — a session's exported files read, and its fetches stored, where its
      workdir is; the peer plane's.
    * ``check_workdir`` — the ``/register`` ownership check of a workdir, on the disk of the host
      the session runs on; the referee's.
    * ``door_route`` — the A2A client's route to a door the daemon cannot dial (on another
      node's loopback), or None when every door is on this host.
    * ``node_traces`` — where a session's trace lives when its child runs on another node, and
      how lines get there; the trace sink's. None when every trace is on this host.
    """

    process: ProcessBackend
    session_files: SessionFiles
    check_workdir: WorkdirCheck
    door_route: Route | None = None
    node_traces: NodeTraces | None = None


Bundler = Callable[[BackendNeeds], BackendServices]
"""A backend package's ``bundle`` function."""

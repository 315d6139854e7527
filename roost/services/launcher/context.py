"""What a launch is done with, and what it carries: two typed values instead of keyword lists.

:class:`LaunchServices` is composed once by the daemon and handed to the launcher, which hands
it on to its starter; :class:`Admitted` is one launch between its admission and its child's
start (:mod:`roost.services.launcher.starter`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from roost.backends.base import ProcessBackend
from roost.core.jobs import Job
from roost.observe.events import EventBus
from roost.observe.metrics import Metrics
from roost.services.referee.service import Referee
from roost.state.config import Config
from roost.state.sessions import SessionRecord, SessionTable
from roost.state.store import Store
from roost.system.blocking import BlockingExecutor

if TYPE_CHECKING:
    from roost.state.registry import Artifact

__all__ = ["Admitted", "LaunchServices"]


@dataclass(frozen=True, slots=True)
class LaunchServices:
    """What launching and supervising jobs is done with, composed once by the daemon."""

    config: Callable[[], Config]
    clock: Callable[[], int]
    referee: Referee
    table: SessionTable
    store: Store
    executor: BlockingExecutor
    metrics: Metrics
    events: EventBus
    backend: ProcessBackend
    url: Callable[[], str]
    """The daemon's own URL, as a child is told it (``MURMUR_ROOST_URL``)."""


@dataclass(frozen=True, slots=True)
class Admitted:
    """A launch that passed its admission, carried to its child's start.

    ``jti`` is the referee's reservation (a delegated launch) that a failed start gives back;
    ``t0`` is when the launch began (monotonic), for its duration and the parent's trace line;
    ``fresh`` says the job directory must not exist yet.
    """

    job: Job
    artifact: Artifact
    parent: SessionRecord | None
    approval: str | None
    jti: str | None
    t0: float
    fresh: bool
    task: dict[str, str | None] | None

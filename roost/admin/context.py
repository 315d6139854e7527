"""Typed application keys the admin app adds to the TCP app's (:mod:`roost.http.context`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from roost.admin.bridge import JobSources
    from roost.admin.control import Control
    from roost.observe.events import EventBus
    from roost.state.sessions import SessionTable

__all__ = ["CONTROL", "EVENTS", "JOBS", "TABLE"]

CONTROL: web.AppKey[Control] = web.AppKey("control")
EVENTS: web.AppKey[EventBus] = web.AppKey("events")
JOBS: web.AppKey[JobSources] = web.AppKey("jobs")
TABLE: web.AppKey[SessionTable] = web.AppKey("table")

"""A real door on an ephemeral loopback port, served as the capsule host serves it.

The host serves the door's plain handler (``Door.handle``) through roost's quiet runner;
``as_app=True`` serves ``Door.app`` instead, the Application form a caller mounts in its own app.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

from a2a.door import Door
from roost.http.server import QuietHandlerRunner

__all__ = ["serve_door"]


@contextlib.asynccontextmanager
async def serve_door(door: Door, *, as_app: bool = False) -> AsyncIterator[str]:
    """Serve ``door`` on 127.0.0.1 and yield its URL (also set as ``door.url``); stop it after."""
    runner: web.BaseRunner
    if as_app:
        runner = web.AppRunner(door.app, access_log=None)
    else:
        runner = QuietHandlerRunner(door.handle, on_cleanup=door.shutdown, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    door.url = url
    try:
        yield url
    finally:
        await runner.cleanup()

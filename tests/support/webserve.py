"""A real aiohttp application on an ephemeral loopback port, for test peers, webhooks and token endpoints."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

__all__ = ["serve_app"]


@contextlib.asynccontextmanager
async def serve_app(app: web.Application) -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1 and yield its ``http://127.0.0.1:<port>``; stop it after."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()

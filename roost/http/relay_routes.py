"""HTTP routes for relay; handlers stay thin and call the service object."""

from __future__ import annotations

from aiohttp import web

__all__ = ["routes"]

routes = web.RouteTableDef()

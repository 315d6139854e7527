"""Typed application keys shared by the HTTP route modules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from roost.daemon import Roost

__all__ = ["ROOST"]

ROOST: web.AppKey[Roost] = web.AppKey("roost")

"""Fixtures shared by the conformance modules: a real door per test, a caller per dialect."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from a2a.door import Door
from tests.a2a.conformance.harness import DIALECTS, SESSION, Caller, Script, serve


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def door(script: Script) -> Door:
    return Door(name="conformance", version="1", session_id=SESSION, runner=script, queue_depth=500)


@pytest.fixture(params=DIALECTS, ids=lambda d: d.name)
async def caller(request: pytest.FixtureRequest, door: Door) -> AsyncIterator[Caller]:
    async with serve(door) as url, aiohttp.ClientSession() as http:
        yield Caller(http, url, request.param)

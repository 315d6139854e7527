"""A background task that runs one step at an interval for as long as the daemon runs.

Why it exists: such a task (the retention sweep, the expiry of slots and leases) dies with the
first exception it lets out, and nothing says so; pruning or lease expiry would then stop for
the rest of the daemon's life. Here a failed step is one log line (the error's class, and a
store error's own sentence, never a traceback) and the next step runs at the next interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from roost.state.store import StoreError

__all__ = ["every"]


async def every(
    interval_secs: Callable[[], float], step: Callable[[], Awaitable[object]], *, failed: str, logger: str
) -> None:
    """Forever: sleep ``interval_secs()`` (read anew each time, so a reload applies), run
    ``step``; a step that raises is logged as event ``failed`` on ``logger`` and the loop goes on.
    Cancellation (the daemon stopping) ends it."""
    log = structlog.get_logger(logger)
    while True:
        await asyncio.sleep(interval_secs())
        try:
            await step()
        except Exception as exc:
            if isinstance(exc, StoreError):
                log.error(failed, error=type(exc).__name__, detail=str(exc))
            else:
                log.error(failed, error=type(exc).__name__)

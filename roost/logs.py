"""structlog set-up: JSON lines under systemd, readable lines on a terminal, never a token.

Every event is one line on stderr (journald collects it). A last processor redacts anything
shaped like a token, so even a mistaken ``log.info(..., header=value)`` cannot leak one.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import orjson
import structlog

from roost.trace import redact

__all__ = ["configure_logging"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def _redact_tokens(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = redact(value)
    return event


def configure_logging(fmt: str = "auto", level: str = "info") -> None:
    """Configure structlog once per process; ``fmt`` is json, console or auto."""
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer: Any
    if use_console:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    else:
        renderer = structlog.processors.JSONRenderer(serializer=orjson.dumps)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
            structlog.processors.format_exc_info,
            _redact_tokens,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=(
            structlog.PrintLoggerFactory(file=sys.stderr)
            if use_console
            else structlog.BytesLoggerFactory(file=sys.stderr.buffer)
        ),
        cache_logger_on_first_use=True,
    )

"""structlog set-up: JSON lines under systemd, readable lines on a terminal, never a token.

Every event is one line on stderr (journald collects it). A last processor redacts anything
shaped like a token, so even a mistaken ``log.info(..., header=value)`` cannot leak one, and an
exception logged with its event is written as its class only, never a traceback.

Loggers are cached on first use (a lazy proxy costs a bind per call), and a cached logger keeps
the processor list, wrapper class and output it was built with. So those never change: the
processors are one list edited in place, the level is a module value a processor reads, and
both formats write bytes. ``roostctl reload`` can then change the level or format of every
logger, cached or not.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any
from urllib.parse import unquote

import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from roost.core.ids import token_id
from roost.observe.tracelines import redact, redact_text

__all__ = ["configure_logging", "enabled_for", "redact_message"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
_METHOD_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "msg": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}
_PROCESSORS: list[Processor] = []
_min_level = logging.INFO


def enabled_for(level: int) -> bool:
    """Whether an event at ``level`` would be written (for guarding costly debug fields)."""
    return level >= _min_level


def _below_level(_logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    if _METHOD_LEVELS.get(method, logging.INFO) < _min_level:
        raise structlog.DropEvent
    return event


def _exception_class(_logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
    """``log.exception(...)`` (or ``exc_info=``) keeps only the exception's class, as ``error``:
    a traceback is many lines, and an exception's text may quote what a request carried."""
    exc_info = event.pop("exc_info", None)
    if not exc_info:
        return event
    if exc_info is True:
        exc: object = sys.exc_info()[1]
    elif isinstance(exc_info, tuple):
        exc = exc_info[1]
    else:
        exc = exc_info
    if isinstance(exc, BaseException):
        event.setdefault("error", type(exc).__name__)
    return event


def _redact_tokens(_logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = redact(value)
    return event


def _to_bytes(_logger: WrappedLogger, _name: str, line: Any) -> Any:
    """After the console renderer: its line as bytes, so one logger serves both formats."""
    return line.encode("utf-8", "replace")


_STDLIB_METHODS = ((logging.ERROR, "error"), (logging.WARNING, "warning"), (logging.INFO, "info"))


class _StdlibBridge(logging.Handler):
    """Every stdlib ``logging`` record (aiohttp's, asyncio's, any library's) as one structlog event.

    The record goes through the same processors as our own events (level, redaction, format),
    and never carries a traceback or an exception's text: aiohttp's message for a malformed
    request quotes the request's own bytes, which can be most of a credential. What is kept is
    the logger, the message (its fixed text plus arguments, redacted) and the exception's class.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            method = next((m for lvl, m in _STDLIB_METHODS if record.levelno >= lvl), "debug")
            fields: dict[str, object] = {"logger": record.name}
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                fields["error"] = type(exc).__name__
                code = getattr(exc, "code", None)
                if isinstance(code, int):
                    fields["status"] = code
            try:
                message = record.getMessage()
            except Exception:
                message = str(record.msg)
            # Redacted here, before any processor: a whole message is cut to length, which could
            # leave a token's tail that no longer looks like one.
            getattr(structlog.get_logger("stdlib"), method)(redact_message(message)[:_MAX_STDLIB_MESSAGE], **fields)
        except Exception:
            pass  # a broken log line must never take down the handler's caller


_MAX_STDLIB_MESSAGE = 300
# A peer handle travels as the path segment after /resources/peer/ (percent-encoded, or cut
# short, or malformed, it need not look like a token): an access line shows only its id.
_PEER_PATH_RE = re.compile(r"(/resources/peer/)([^\s?#\"']+)")


def redact_message(message: str) -> str:
    """A stdlib record's text as it may be written: the segment after ``/resources/peer/`` as
    ``<handle:16-hex id>``, and every token-shaped word as its id."""
    if "/resources/peer/" in message:
        message = _PEER_PATH_RE.sub(lambda m: f"{m.group(1)}<handle:{token_id(unquote(m.group(2)))}>", message)
    return redact_text(message)


_BRIDGE = _StdlibBridge()


def _bridge_stdlib(level: int) -> None:
    root = logging.getLogger()
    root.handlers[:] = [_BRIDGE]
    root.setLevel(level)
    for name in ("aiohttp.access", "aiohttp.client", "aiohttp.internal", "aiohttp.server", "aiohttp.web", "asyncio"):
        named = logging.getLogger(name)
        named.handlers[:] = []
        named.propagate = True
    logging.captureWarnings(True)


def configure_logging(fmt: str = "auto", level: str = "info") -> None:
    """Configure structlog (again, on reload); ``fmt`` is json, console or auto."""
    global _min_level
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    tail: list[Processor]
    if use_console:
        tail = [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()), _to_bytes]
    else:
        tail = [structlog.processors.JSONRenderer(serializer=orjson.dumps)]
    _PROCESSORS[:] = [
        _below_level,
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
        _exception_class,
        _redact_tokens,
        *tail,
    ]
    _min_level = _LEVELS.get(level, logging.INFO)
    _bridge_stdlib(_min_level)
    structlog.configure(
        processors=_PROCESSORS,
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=structlog.BytesLoggerFactory(file=sys.stderr.buffer),
        cache_logger_on_first_use=True,
    )

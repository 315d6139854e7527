"""The one place exceptions become HTTP answers.

Handlers raise :class:`roost.core.errors.RoostError`; this renders ``{"error": "<sentence>"}`` with
its status. aiohttp's own HTTP exceptions (unknown route, wrong method, body too large) get the
same JSON shape. Anything else is logged with its traceback and answered with a fixed 500
sentence: no traceback and no exception text ever reaches a client.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import orjson
import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from roost.core.errors import BadRequest, RoostError
from roost.http.jsonbody import BodyError, decode_body

__all__ = [
    "BODY_DEADLINE_SECS",
    "CORRUPT_BODY",
    "INTERNAL_ERROR",
    "MAX_BODY_BYTES",
    "BodyTimeout",
    "error_middleware",
    "json_error",
    "json_ok",
    "read_body",
    "read_json",
]

log = structlog.get_logger("roost.http")

MAX_BODY_BYTES = 64 * 1024
BODY_DEADLINE_SECS = 30.0
CORRUPT_BODY = "the request body could not be read: its Content-Encoding or framing is not valid"
SLOW_BODY = f"the request body did not arrive within {BODY_DEADLINE_SECS:g} seconds"


class BodyTimeout(RoostError):
    """408: the body trickled in too slowly; the connection is not kept."""

    default_status = 408


INTERNAL_ERROR = "internal error: the daemon could not complete this request; its log has the details"


def _dumps(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def json_ok(body: object, status: int = 200) -> web.Response:
    """A compact JSON answer (as upstream's serde writes it), encoded by orjson."""
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def json_error(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, dumps=_dumps, headers=headers)


_HTTP_SENTENCES = {
    404: "not found",
    405: "method not allowed",
    413: f"request body too large: this daemon accepts at most {MAX_BODY_BYTES} bytes",
}


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except RoostError as exc:
        answer = json_error(exc.status, exc.body())
        if isinstance(exc, BodyTimeout):
            answer.force_close()
        return answer
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        sentence = _HTTP_SENTENCES.get(exc.status) or (exc.reason or "request refused").lower()
        headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return json_error(exc.status, {"error": sentence}, headers)
    except web.RequestPayloadError:
        # A body aiohttp could not decode (a corrupt gzip stream, broken chunking): the client's
        # error, and the connection is closed since the rest of its bytes cannot be framed.
        resp = json_error(400, {"error": CORRUPT_BODY})
        resp.force_close()
        return resp
    except ConnectionResetError:
        raise
    except Exception:
        log.exception("request_failed", method=request.method, path=request.rel_url.path)
        return json_error(500, {"error": INTERNAL_ERROR})


async def read_body(request: web.BaseRequest) -> bytes:
    """The whole request body within :data:`BODY_DEADLINE_SECS` (else 408, the connection closed),
    so a body trickled a byte at a time holds no handler for long.

    A body that has wholly arrived (the usual case: it came with the head) is read without the
    deadline's timer and task: reading it cannot wait."""
    if request.content.is_eof():
        return await request.read()
    try:
        return await asyncio.wait_for(request.read(), BODY_DEADLINE_SECS)
    except TimeoutError:
        raise BodyTimeout(SLOW_BODY) from None


async def read_json(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or a 400/408/413 with one sentence."""
    raw = await read_body(request)
    try:
        body = decode_body(raw)
    except BodyError as exc:
        raise BadRequest(f"invalid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("invalid JSON: the body must be a JSON object")
    return body

"""The HTTP half of ``GET /resources/peer/{handle}``: read the request, render the decision.

:mod:`roost.services.peer.redeem` decides (the check order, the trace lines) from a typed
:class:`~roost.services.peer.redeem.RedeemRequest`; this module turns the aiohttp request into one and
the decision into headers and bytes. A large file is streamed from the descriptor the plane
opened; when its bytes can no longer be vouched for once sent (the file changed, its node
stopped answering, or the handle stopped verifying meanwhile) the connection is aborted, so
the client sees a short body, never a complete 200.
"""

from __future__ import annotations

from aiohttp import web

from roost.core.wire import AUDIENCE_HEADER, GENERATION_HEADER, HANDLE_ID_HEADER, MTIME_HEADER
from roost.http.middleware import json_error
from roost.services.peer.errors import MethodNotAllowed
from roost.services.peer.redeem import PREFIX, LargeFile, RedeemRequest, Refusal, SmallFile
from roost.state.sessions import SessionRecord

__all__ = ["read_redeem", "render"]


def read_redeem(request: web.Request, door: SessionRecord | None = None) -> RedeemRequest:
    """The method, the raw token below ``/resources/peer/``, every audience header, and the
    session whose door passed it on (authenticated by the caller from its credential)."""
    raw = request.rel_url.raw_path
    token = raw[len(PREFIX) + 1 :] if raw.startswith(PREFIX + "/") else ""
    return RedeemRequest(request.method, token, request.headers.getall(AUDIENCE_HEADER, []), door)


def _handle_headers(handle_id: str) -> dict[str, str]:
    return {HANDLE_ID_HEADER: handle_id, GENERATION_HEADER: "0"}


def _served_headers(handle_id: str, mtime_ms: int, sha256: str) -> dict[str, str]:
    headers = _handle_headers(handle_id)
    headers["content-type"] = "application/octet-stream"
    headers[MTIME_HEADER] = str(mtime_ms)
    headers["etag"] = f'"sha256:{sha256}"'
    return headers


def _refusal(refusal: Refusal) -> web.Response:
    headers = _handle_headers(refusal.handle_id) if refusal.handle_id is not None else {}
    if isinstance(refusal.error, MethodNotAllowed):
        headers["allow"] = "GET"
    return json_error(refusal.error.status, refusal.error.coded().body(), headers)


async def render(request: web.Request, outcome: Refusal | SmallFile | LargeFile) -> web.StreamResponse:
    """The answer to the redeem ``outcome`` decided."""
    if isinstance(outcome, Refusal):
        return _refusal(outcome)
    if isinstance(outcome, SmallFile):
        body = outcome.body
        return web.Response(body=body.data, headers=_served_headers(outcome.handle_id, body.mtime_ms, body.sha256))
    try:
        return await _stream(request, outcome)
    finally:
        await outcome.close()


async def _stream(request: web.Request, large: LargeFile) -> web.StreamResponse:
    sha = await large.hash()
    if isinstance(sha, Refusal):
        return _refusal(sha)
    resp = web.StreamResponse(headers=_served_headers(large.handle_id, large.body.mtime_ms, sha))
    resp.content_length = large.body.size
    await resp.prepare(request)
    failed = None
    complete = False
    try:
        sent_ok = await large.body.send(request, resp)
        failed = large.after_send(sent_ok)
        complete = failed is None
    finally:
        if not complete and request.transport is not None:
            request.transport.abort()
    if complete:
        await resp.write_eof()
    await large.finish(failed)
    return resp

"""``GET /artifacts/{sha256}``: a registry artifact's bytes for a node keeper (:mod:`roost.services.artifactserve`).

The keeper token is checked before the digest is looked at; an unknown digest is 404. The body
is streamed from the executor in 256 KiB reads, with ``Content-Length``, and hashed on the way:
bytes that no longer match (the file was replaced while it was read) are logged and the
connection is cut before the last chunk, so the keeper's own check never even sees them.
"""

from __future__ import annotations

import hashlib
import os
from typing import Final

import structlog
from aiohttp import web

from roost.core.errors import NotFound
from roost.http.context import EXECUTOR, KEYS, SETTINGS
from roost.services.artifactserve import SHA256_HEADER, ArtifactIndex, keeper_node, require_sha256

__all__ = ["ARTIFACT_INDEX", "install"]

routes = web.RouteTableDef()
log = structlog.get_logger("roost.artifacts")

ARTIFACT_INDEX: web.AppKey[ArtifactIndex] = web.AppKey("artifact_index")
_CHUNK: Final = 256 * 1024


@routes.get("/artifacts/{sha256}", allow_head=False)
async def get_artifact(request: web.Request) -> web.StreamResponse:
    executor = request.app[EXECUTOR]
    node = keeper_node(request.app[KEYS].rings(), request.headers.get("authorization"))
    sha256 = require_sha256(request.match_info["sha256"])
    opened = await executor.run(request.app[ARTIFACT_INDEX].open, request.app[SETTINGS].registry, sha256)
    if opened is None:
        raise NotFound(f"no artifact with sha256 {sha256} in the registry")
    try:
        resp = web.StreamResponse(
            headers={"Content-Type": "application/zip", SHA256_HEADER: sha256, "Content-Length": str(opened.size)}
        )
        await resp.prepare(request)
        digest = hashlib.sha256()
        left = opened.size
        while left > 0:
            chunk = await executor.run(os.read, opened.fd, min(_CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            digest.update(chunk)
            if left <= 0 and digest.hexdigest() != sha256:
                log.warning("artifact_changed_while_served", node=node, sha256=sha256[:16])
                if request.transport is not None:
                    request.transport.close()
                return resp
            await resp.write(chunk)
        await resp.write_eof()
    finally:
        await executor.run(os.close, opened.fd)
    log.info("artifact_served", node=node, sha256=sha256[:16], coordinates=opened.artifact.coordinates)
    return resp


def install(app: web.Application) -> None:
    """Add the route and the index it learns sha256s into (one per application)."""
    app[ARTIFACT_INDEX] = ArtifactIndex()
    app.add_routes(routes)

"""``GET /openapi.json``: an OpenAPI 3.1 document built from :mod:`roost.core.api_models`.

Why generate rather than annotate handlers (aiohttp-pydantic, aiohttp-apispec): the handlers
stay framework-free and fast, and one table (``api_models.ENDPOINTS``) says which operation
answers which model and which error body. OpenAPI 3.1 schemas are JSON Schema 2020-12, which
is what pydantic emits, so the models' schemas go in unchanged under ``components/schemas``.
The document is built once per process and cached.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from roost import __version__
from roost.core.api_models import ENDPOINTS, Body, Endpoint
from roost.core.wire import APPROVAL_HEADER, AUDIENCE_HEADER, CREDENTIAL_HEADER

__all__ = ["build_openapi", "openapi_document"]

_REF = "#/components/schemas/{model}"
_REASONS = {
    200: "OK",
    201: "Created",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    413: "Payload Too Large",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_SECURITY = {
    "credential": {"type": "apiKey", "in": "header", "name": CREDENTIAL_HEADER},
    "approval": {"type": "apiKey", "in": "header", "name": APPROVAL_HEADER},
    "keeper": {"type": "http", "scheme": "bearer", "description": "a node keeper's mnk1 token"},
}


def _content(body: Body, refs: dict[type[BaseModel], str]) -> dict[str, Any]:
    if body == "text":
        return {"text/plain": {"schema": {"type": "string"}}}
    if body == "binary":
        return {
            "application/octet-stream": {"schema": {"type": "string", "contentMediaType": "application/octet-stream"}}
        }
    if body == "json":
        return {"application/json": {"schema": {"type": "object"}}}
    if isinstance(body, tuple):
        return {"application/json": {"schema": {"anyOf": [{"$ref": refs[m]} for m in body]}}}
    assert not isinstance(body, str)
    return {"application/json": {"schema": {"$ref": refs[body]}}}


def _models() -> list[type[BaseModel]]:
    seen: dict[str, type[BaseModel]] = {}
    for ep in ENDPOINTS:
        for body in (ep.ok, ep.request, *ep.errors.values()):
            for model in body if isinstance(body, tuple) else (body,):
                if isinstance(model, type):
                    seen.setdefault(model.__name__, model)
    return list(seen.values())


def _operation(ep: Endpoint, refs: dict[type[BaseModel], str]) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": f"{ep.method}_{ep.path.strip('/').replace('/', '_').replace('{', '').replace('}', '')}",
        "summary": ep.summary,
        "tags": [ep.tag],
        "responses": {
            str(ep.ok_status): {"description": _REASONS[ep.ok_status], "content": _content(ep.ok, refs)},
        },
    }
    params = [p.strip("{}") for p in ep.path.split("/") if p.startswith("{")]
    if params:
        op["parameters"] = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in params]
    if ep.path == "/resources/peer/{handle}":
        # A handle is one path segment and never starts with a dot ("." and ".." would be
        # collapsed by URL normalization into another path, which is not this operation).
        op["parameters"][0]["schema"]["pattern"] = r"^[^./][^/]*$"
        op["parameters"].append(
            {"name": AUDIENCE_HEADER, "in": "header", "required": True, "schema": {"type": "string"}}
        )
    if ep.request is not None:
        op["requestBody"] = {"required": True, "content": _content(ep.request, refs)}
    for status, body in sorted(ep.errors.items()):
        op["responses"][str(status)] = {"description": _REASONS.get(status, "Error"), "content": _content(body, refs)}
    if ep.auth is not None:
        # /register and /jobs also accept no header (top-level); an empty requirement says so.
        optional = ep.path in ("/register", "/jobs")
        op["security"] = [{ep.auth: []}, {}] if optional else [{ep.auth: []}]
    return op


def build_openapi() -> dict[str, Any]:
    """The whole document (a fresh dict each call)."""
    models = _models()
    keyed, defs = models_json_schema([(m, "validation") for m in models], ref_template=_REF)
    refs = {m: keyed[(m, "validation")]["$ref"] for m in models}
    paths: dict[str, dict[str, Any]] = {}
    for ep in ENDPOINTS:
        paths.setdefault(ep.path, {})[ep.method] = _operation(ep, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "mur-roost",
            "version": __version__,
            "summary": "Host daemon for Murmur agent capsules: referee, launcher, peer plane and A2A relay.",
            "description": (
                'The peer-facing TCP API. Errors are {"error": "<sentence>"}; the peer plane\'s are '
                '{"error": "<code>", "message": "<sentence>"}. The admin API lives on a unix socket '
                "and is documented in docs/operations.md."
            ),
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "servers": [{"url": "http://127.0.0.1:7700"}],
        "paths": paths,
        "components": {"schemas": defs.get("$defs", {}), "securitySchemes": _SECURITY},
    }


@functools.cache
def openapi_document() -> bytes:
    """The document serialised once per process (it only changes with the code)."""
    import json

    return json.dumps(build_openapi(), separators=(",", ":"), sort_keys=False).encode()

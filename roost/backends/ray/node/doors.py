"""The node keeper's door calls: the daemon's HTTP requests to a session's door, made on the
session's own node.

A capsule's door listens on its node's loopback (``127.0.0.1``), which on another machine the
daemon cannot reach. Everything the daemon sends to a door of a session running on a Ray node
(a child's completion, a relay's message, a card fetch) is handed to that node's keeper, which
makes the request on its own loopback and gives back the answer (roost/backends/ray/doors.py picks
the route; docs/operations.md "Running with Ray").

Bounded like any door call of the daemon's: a total timeout, no redirects followed, no cookies,
and an answer larger than ``max_bytes`` is refused rather than carried back. Only a door of a
child this keeper runs now, on this node's loopback, is called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp

__all__ = ["DOOR_ANSWER_MAX", "DOOR_METHODS", "DoorKeeper", "DoorRequest"]

DOOR_ANSWER_MAX = 8 * 1024 * 1024
DOOR_METHODS = ("GET", "POST")


@dataclass(frozen=True, slots=True)
class DoorRequest:
    """One HTTP exchange with the door of the child of ``job_id``: built by the daemon
    (roost/backends/ray/doors.py), carried whole to the keeper of the child's node, made there.

    ``port`` is the door's port on that node's loopback, ``path`` the path and query (starting
    with ``/``); ``timeout_secs`` bounds the whole exchange."""

    job_id: str
    method: str
    port: int
    path: str
    headers: dict[str, str]
    body: bytes | None
    timeout_secs: float


class DoorKeeper:
    """Mixed into :class:`roost.backends.ray.node.keeper.NodeKeeper` (it holds ``children``)."""

    children: dict[str, Any]

    async def door_request(self, request: DoorRequest, max_bytes: int = DOOR_ANSWER_MAX) -> dict[str, Any]:
        """``{"status", "body", "location"}``, or ``{"error": sentence}`` when there is no answer."""
        child = self.children.get(request.job_id)
        if child is None or child.status is not None:
            return {"error": f"the job {request.job_id} has no running child on this node"}
        method, port, path, timeout_secs = request.method, request.port, request.path, request.timeout_secs
        if method not in DOOR_METHODS or not 0 < port < 65536 or not path.startswith("/"):
            return {"error": "not a door request (GET or POST to a loopback port and path)"}
        timeout = aiohttp.ClientTimeout(total=timeout_secs, sock_connect=min(5.0, timeout_secs))
        url = f"http://127.0.0.1:{port}{path}"
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout, cookie_jar=aiohttp.DummyCookieJar()) as http,
                http.request(method, url, data=request.body, headers=request.headers, allow_redirects=False) as resp,
            ):
                data = await resp.content.read(max_bytes + 1)
                if len(data) > max_bytes:
                    return {"error": f"the door's answer is larger than {max_bytes} bytes"}
                return {"status": resp.status, "body": data, "location": resp.headers.get("Location")}
        except TimeoutError:
            return {"error": f"the door did not answer within {timeout_secs:g} s"}
        except aiohttp.ClientConnectorError as exc:
            os_err = exc.os_error
            why = os_err.strerror if isinstance(os_err, OSError) and os_err.strerror else str(exc)
            return {"error": f"the door on its node did not accept the connection: {why}"}
        except (aiohttp.ClientError, OSError) as exc:
            return {"error": f"the door call failed on its node: {type(exc).__name__}"}

"""Which job, if any, the process at the other end of a loopback TCP request belongs to.

Why: a uid alone cannot tell the operator's root from root inside a contained capsule, and the
TCP routes where that difference matters ask here — a job's view and cancel (root inside a job
is not the operator), a top-level launch without a credential, and a top-level registration
(each would otherwise let a capsule act outside its own spawn envelope). The connection's other
end is found with sock_diag and looked for in the process trees of the running jobs
(:func:`roost.system.jobpeer.socket_job_root`, through the executor). docs/security.md, "Who may
call what".
"""

from __future__ import annotations

from typing import Final

from aiohttp import web

from roost.http.context import EXECUTOR, LAUNCHER
from roost.system.jobpeer import socket_job_root
from roost.system.peercred import owner_of

__all__ = ["UNKNOWN", "peer_in_job", "peer_job_root"]

UNKNOWN: Final = -1
"""The kernel could not say which socket is the connection's other end (no sock_diag answer)."""


def _peer_inode(request: web.Request) -> int | None:
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    local = transport.get_extra_info("sockname") if transport is not None else None
    if not peer or not local:
        return None
    found = owner_of((str(peer[0]), int(peer[1])), (str(local[0]), int(local[1])))
    return found[1] if found else None


async def peer_job_root(request: web.Request) -> int | None:
    """The root process of the job whose process tree holds the caller's end of this connection;
    None when no job's does (or no job runs); :data:`UNKNOWN` when the kernel cannot say."""
    roots = request.app[LAUNCHER].job_roots()
    if not roots:
        return None
    inode = _peer_inode(request)
    if inode is None:
        return UNKNOWN
    root: int | None = await request.app[EXECUTOR].run(socket_job_root, inode, roots)
    return root


async def peer_in_job(request: web.Request) -> bool:
    """Whether the caller's process belongs to a job (one the kernel cannot place counts as inside)."""
    return await peer_job_root(request) is not None

"""Who may call what: the pure half of the one authorization table (no I/O).

Why one table: a route that decides on its own who may call it is how a no-credential path
ends up checking "loopback" only, or a socket answers a process inside a job. Every listener
(the daemon's TCP app, its admin socket, the capsule door, the capsule host socket, the
dashboard) declares each of its routes once with a :class:`Policy`; the edge
(:mod:`roost.http.authz`) gathers the :class:`CallerFacts` of a request from the kernel and its
headers, and :func:`decide` answers allow or a :class:`Denial`. A route without a policy is
denied (default deny), and a test enumerates the running applications' routes so one cannot be
added without a policy. docs/security.md, "Who may call what".

The table says *who*; a handler still verifies the token it names (a credential's MAC, a
handle's audience), and resource ownership (a job's owner uid, its parent session) is
:func:`may_see_job`, applied where the resource is looked up.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import Enum
from typing import Final

__all__ = [
    "CROSS_SITE",
    "FOREIGN_HOST",
    "CallerFacts",
    "Denial",
    "Listener",
    "Need",
    "Policy",
    "Who",
    "cross_site",
    "decide",
    "host_allowed",
    "host_name",
    "launch_allowed",
    "may_see_job",
    "netloc_key",
]


class Listener(Enum):
    """Where a request arrived: each has its own route table."""

    DAEMON = "daemon"
    ADMIN = "admin"
    DOOR = "door"
    HOST_SOCKET = "host_socket"
    DASHBOARD = "dashboard"


class Who(Enum):
    """Who a route answers (before the handler verifies the token it names)."""

    ANYONE = "anyone"
    """Unauthenticated (upstream's ``/health``, ``GET /status/{session_id}``, redeem's own checks)."""
    LOCAL = "local"
    """Any caller on this host, no credential: metrics, probes, the OpenAPI document."""
    CREDENTIAL = "credential"
    """A session credential (``x-murmur-spawn-credential``); the handler verifies it."""
    REGISTER = "register"
    """A spawn approval (a child), or a caller on this host (a top-level session)."""
    LAUNCH = "launch"
    """A credential (a delegation), or a local uid in ``launch_uids`` (a top-level job)."""
    JOB = "job"
    """A job's parent session's credential, its owner uid, or root not inside a job."""
    HANDLE = "handle"
    """A peer handle with its audience (the peer plane checks it in its documented order)."""
    KEEPER = "keeper"
    """A node keeper's token."""
    OPERATOR = "operator"
    """The daemon's own uid or root, from a process that is not inside a job."""
    DAEMON_UID = "daemon_uid"
    """The daemon's own uid or root (resetting the loop-lag samples)."""
    ENTRYPOINT = "entrypoint"
    """A process descended from the capsule host's current entrypoint (the host socket)."""
    DASHBOARD_OWNER = "dashboard_owner"
    """The uid that started the dashboard (its cookie and CSRF value are the dashboard's own check)."""
    DOOR_CALLER = "door_caller"
    """Any caller on this host; its tasks belong to its uid, and origin/trust only under a seal."""


class Need(Enum):
    """What a caller on another host must bring to a route (None in a policy: local only)."""

    NOTHING = "nothing"
    CREDENTIAL = "credential"
    APPROVAL = "approval"
    KEEPER = "keeper"
    HANDLE = "handle"


@dataclass(frozen=True, slots=True)
class Policy:
    """One route's entry: who may call it, what a remote caller must bring, whether it acts."""

    who: Who
    remote: Need | None = None
    acts: bool = False
    """State-changing: a cross-site (browser) request is refused."""


@dataclass(frozen=True, slots=True)
class CallerFacts:
    """What the edge learned about one request's caller (kernel identity and headers)."""

    uid: int | None
    local: bool
    """On this host: a unix socket or a loopback TCP peer."""
    daemon_uid: int
    in_job: bool = False
    """The peer process belongs to a job (its cgroup, or its ancestry reaches a job's root)."""
    credential: bool = False
    approval: bool = False
    keeper: bool = False
    cross_site: bool = False
    host_ok: bool = True
    entrypoint: bool = False
    """The peer process descends from the host's current entrypoint (the host socket only)."""


@dataclass(frozen=True, slots=True)
class Denial:
    """A refusal: its status, one sentence, and a short kind for logs and metrics."""

    status: int
    sentence: str
    kind: str


FOREIGN_HOST: Final = (
    "refused: the Host header names neither this daemon nor an address; a page whose DNS name "
    "was rebound to this host cannot use it"
)
CROSS_SITE: Final = (
    "refused: a cross-site request (a foreign Origin, or Sec-Fetch-Site: cross-site) may not change "
    "anything here; send it without a browser, or from this daemon's own origin"
)
NO_POLICY: Final = "refused: this route has no entry in the authorization table, so it answers nobody"
LOCAL_ONLY: Final = (
    "this endpoint answers only callers on the daemon's own host; from another host only endpoints "
    "that authenticate the caller can be reached (docs/operations.md, Network)"
)
_MISSING: Final[dict[Need, str]] = {
    Need.CREDENTIAL: "from another host this endpoint needs a session credential (x-murmur-spawn-credential)",
    Need.APPROVAL: (
        "from another host /register needs a spawn approval (x-murmur-spawn-approval): "
        "a top-level session registers only on the daemon's own host"
    ),
    Need.KEEPER: "from another host this endpoint needs a node keeper's token (authorization: Bearer)",
}
ADMIN_REFUSED: Final = "refused: the admin socket answers only the daemon's own user"
ADMIN_IN_JOB: Final = "refused: the admin socket answers no process inside a job, whatever its uid"
NOT_ENTRYPOINT: Final = "refused: this host socket answers only processes of its own session's running entrypoint"
FORBIDDEN: Final = "forbidden"


def _brings(need: Need, facts: CallerFacts) -> bool:
    if need is Need.CREDENTIAL:
        return facts.credential
    if need is Need.APPROVAL:
        return facts.approval
    if need is Need.KEEPER:
        return facts.keeper
    return True


def _remote(policy: Policy, facts: CallerFacts) -> Denial | None:
    if policy.remote is None:
        return Denial(403, LOCAL_ONLY, "not_local")
    if not _brings(policy.remote, facts):
        return Denial(403, _MISSING[policy.remote], "not_local")
    return None


def decide(policy: Policy | None, facts: CallerFacts) -> Denial | None:
    """Allow (None) or refuse a request to a route with ``policy`` from a caller with ``facts``.

    The order: no policy (deny), the Host header, a cross-site request to a route that acts,
    a caller from another host (only what it brings a token for), then the route's own rule.
    """
    if policy is None:
        return Denial(403, NO_POLICY, "no_policy")
    if not facts.host_ok:
        return Denial(403, FOREIGN_HOST, "foreign_host")
    if policy.acts and facts.cross_site:
        return Denial(403, CROSS_SITE, "cross_site")
    if not facts.local:
        return _remote(policy, facts)
    who = policy.who
    if who is Who.OPERATOR:
        if facts.uid is None or facts.uid not in (facts.daemon_uid, 0):
            return Denial(403, ADMIN_REFUSED, "not_operator")
        if facts.in_job:
            return Denial(403, ADMIN_IN_JOB, "in_job")
    elif who is Who.ENTRYPOINT and not facts.entrypoint:
        return Denial(403, NOT_ENTRYPOINT, "not_entrypoint")
    elif who is Who.DASHBOARD_OWNER and facts.uid != facts.daemon_uid:
        return Denial(403, FORBIDDEN, "not_owner")
    return None


def launch_allowed(uid: int | None, launch_uids: tuple[int, ...] | None, daemon_uid: int) -> bool:
    """Whether ``uid`` may obtain launches (a top-level job, or any job with its sessions'
    credentials): listed in ``launch_uids`` (default: the daemon's own uid)."""
    allowed = launch_uids if launch_uids is not None else (daemon_uid,)
    return uid is not None and uid in allowed


def may_see_job(
    *,
    parent_id: str | None,
    owner_uid: int | None,
    session_id: str | None,
    caller_uid: int | None,
    caller_in_job: bool,
) -> bool:
    """Whether a caller may see and control a job: the credential of its parent session
    (``session_id`` is the credential's session, None without one), else its owner uid, else
    root from a process that is not inside a job."""
    if session_id is not None:
        return parent_id == session_id
    if caller_uid is None:
        return False
    if caller_uid == 0:
        return not caller_in_job
    return owner_uid is not None and caller_uid == owner_uid


def host_name(host: str | None) -> str | None:
    """The name part of a ``Host`` header (``[::1]:80`` → ``::1``), lower-cased; None if absent."""
    if host is None:
        return None
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else host
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_allowed(host: str | None, names: frozenset[str], *, any_address: bool) -> bool:
    """Whether a ``Host`` header names us: one of ``names`` (lower-case), or — with
    ``any_address`` — any IP literal (a rebinding attack needs a DNS name of its own). A request
    without ``Host`` (HTTP/1.0) is allowed: no browser sends one."""
    name = host_name(host)
    if name is None:
        return True
    if name in names:
        return True
    return any_address and _is_ip(name)


def netloc_key(netloc: str) -> str | None:
    """``name:port`` of a ``host[:port]`` (brackets dropped, lower-cased); None without a port."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        end = netloc.find("]")
        if end < 0 or not netloc[end + 1 :].startswith(":"):
            return None
        return f"{netloc[1:end]}:{netloc[end + 2 :]}"
    name, sep, port = netloc.rpartition(":")
    return f"{name.rstrip('.')}:{port}" if sep and name and port.isdigit() else None


def cross_site(origin: str | None, fetch_site: str | None, origins: frozenset[str]) -> bool:
    """Whether a request came from another site's page: ``Sec-Fetch-Site: cross-site``, or an
    ``Origin`` (``null`` included) that is not one of ours (``origins``: ``name:port`` of each of
    our listeners, as :func:`netloc_key` writes them). Clients that are not browsers send
    neither and are never cross-site."""
    if fetch_site is not None and fetch_site.strip().lower() == "cross-site":
        return True
    if origin is None:
        return False
    scheme, sep, rest = origin.strip().partition("://")
    netloc = rest.split("/", 1)[0]
    scheme = scheme.lower()
    if not sep or scheme not in _PORTS or not netloc or "@" in netloc:
        return True  # "null", a file: page, an opaque origin
    if ":" not in netloc.rsplit("]", 1)[-1]:
        netloc = f"{netloc}:{_PORTS[scheme]}"
    return netloc_key(netloc) not in origins


_PORTS: Final = {"http": 80, "https": 443}

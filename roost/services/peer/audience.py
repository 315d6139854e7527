"""Audience strings: who a handle is addressed to (``docs/peer-plane.md``).

An audience is ``<name>@<host:port>``, lowercased, MAC-bound into the handle but not carried in
it. The minter derives it from the peer's agent card; the fetcher derives its own from the same
two facts its card publishes (its capsule name and the URL of its door), so both sides agree
without talking to each other.

Which URL: the card our doors serve (``a2a.card.build_card``) has the 0.3 top-level ``url``
*and* ``supportedInterfaces``; both name the same door. We read the top-level ``url`` (what
upstream reads) and fall back to the first interface URL only for a 1.0-only card that has no
top-level ``url``. ``host:port`` is upstream's ``parse_host_port``: strip a leading ``http://`` or
``https://`` (case-sensitive), cut at the first ``/``. Python's ``str.lower`` differs from Rust's
``to_lowercase`` for a few non-ASCII code points; capsule names are ASCII (manifest rule), so
this only matters for foreign cards.
"""

from __future__ import annotations

from a2a.protocol.models import AgentCard

__all__ = ["AudienceError", "audience", "audience_from_card", "host_port"]


class AudienceError(ValueError):
    """No audience can be formed; the message is one sentence (``peer_unreachable: …`` upstream)."""


def host_port(url: str) -> str | None:
    """``http(s)://host:port/...`` → ``host:port``; ``None`` when nothing is left."""
    rest = url.strip()
    for prefix in ("http://", "https://"):
        if rest.startswith(prefix):
            rest = rest[len(prefix) :]
            break
    rest = rest.split("/", 1)[0]
    return rest or None


def audience(name: str, url: str) -> str:
    """``<name>@<host:port of url>`` lowercased; raise :class:`AudienceError` if either part is empty."""
    clean = name.strip()
    hp = host_port(url)
    if not clean:
        raise AudienceError("the peer's agent card carries no 'name'")
    if hp is None:
        raise AudienceError("the peer's agent card carries no 'url'")
    value = f"{clean}@{hp}".lower()
    if "\x1f" in value or any(ord(c) < 0x20 for c in value):
        raise AudienceError("the peer's agent card names an audience with control characters")
    return value


def audience_from_card(card: AgentCard) -> str:
    """The audience a card describes (top-level ``url``, else the first interface's URL)."""
    url = card.url
    if not (url and url.strip()) and card.supported_interfaces:
        url = card.supported_interfaces[0].url
    if not (url and url.strip()):
        raise AudienceError("the peer's agent card carries no 'url'")
    return audience(card.name, url)

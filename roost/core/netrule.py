"""Network allow entries: parsing, destination matching and envelope coverage.

One grammar (upstream ``NetworkAllowRule``) serves ``capabilities.network.allow`` and
``capabilities.peer_fetch.allow``:

* ``scheme://host[:port][/]`` — scheme ``http``/``https``; the port is explicit or the scheme's
  default (80/443); no path other than ``/``, no query, no fragment, no userinfo.
* ``host`` or ``host:port`` — no scheme (any scheme); a bare host also means any port.

Hosts are compared as lowercased strings, exactly: no DNS, no wildcards, no subdomains, so
``localhost`` never matches ``127.0.0.1``. Every ambiguity errs toward deny: an entry we cannot
parse grants nothing (as a parent) and is covered by nothing (as a child).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["DEFAULT_PORTS", "NetworkAllowRule", "Target", "allows", "covers"]

DEFAULT_PORTS: Final[dict[str, int]] = {"http": 80, "https": 443}

# A DNS-ish name or dotted IPv4 (one optional trailing dot), or a bracketed IPv6 literal.
_NAME_RE: Final = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?")
_IPV6_RE: Final = re.compile(r"\[[0-9a-f:.]+\]")
_PORT_RE: Final = re.compile(r"[0-9]{1,5}")


def _host(text: str) -> str | None:
    host = text.lower()
    if host.isascii() and (_NAME_RE.fullmatch(host) or _IPV6_RE.fullmatch(host)):
        return host
    return None


def _port(text: str) -> int | None:
    if not _PORT_RE.fullmatch(text):
        return None
    port = int(text)
    return port if 1 <= port <= 65535 else None


def _host_port(authority: str) -> tuple[str, int | None] | None:
    """Split ``host[:port]`` (IPv6 in brackets); ``None`` if either part is invalid."""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            return None
        host_text, rest = authority[: end + 1], authority[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        host_text, colon, port_text_raw = authority.partition(":")
        port_text = port_text_raw if colon else None
    host = _host(host_text)
    if host is None:
        return None
    if port_text is None:
        return host, None
    port = _port(port_text)
    return None if port is None else (host, port)


def _url_parts(url: str) -> tuple[str, str, str] | None:
    """``scheme://authority<rest>`` → (lowercased scheme, authority, rest), or ``None``."""
    scheme, sep, remainder = url.partition("://")
    if not sep or not scheme:
        return None
    cut = len(remainder)
    for ch in "/?#":
        i = remainder.find(ch)
        if 0 <= i < cut:
            cut = i
    authority, rest = remainder[:cut], remainder[cut:]
    if "@" in authority:  # userinfo: never meaningful in an allow entry or a peer address
        return None
    return scheme.lower(), authority, rest


@dataclass(frozen=True, slots=True)
class NetworkAllowRule:
    """A parsed allow entry. ``scheme`` is ``None`` for bare entries; ``port`` is ``None`` only
    for a bare entry without a port. ``port_explicit`` records whether the entry spelled the port
    (informational: coverage and matching compare the effective port)."""

    scheme: str | None
    host: str
    port: int | None
    port_explicit: bool

    @classmethod
    def parse(cls, entry: str) -> NetworkAllowRule | None:
        """Parse one entry; ``None`` if it is not valid (E-CAP-001 upstream)."""
        text = entry.strip()
        if not text:
            return None
        if "://" in text:
            parts = _url_parts(text)
            if parts is None:
                return None
            scheme, authority, rest = parts
            if scheme not in DEFAULT_PORTS or rest not in ("", "/"):
                return None
            hp = _host_port(authority)
            if hp is None:
                return None
            host, port = hp
            return cls(scheme, host, DEFAULT_PORTS[scheme] if port is None else port, port is not None)
        hp = _host_port(text)
        if hp is None:
            return None
        host, port = hp
        return cls(None, host, port, port is not None)

    def covers(self, child: NetworkAllowRule) -> bool:
        """Whether this (parent) rule grants at least everything ``child`` grants."""
        return (
            self.host == child.host
            and (self.scheme is None or self.scheme == child.scheme)
            and (self.port is None or self.port == child.port)
        )

    def matches(self, target: Target) -> bool:
        """Whether a destination is allowed by this rule (host equal; scheme and port, if set, equal)."""
        return (
            self.host == target.host
            and (self.scheme is None or self.scheme == target.scheme)
            and (self.port is None or self.port == target.port)
        )

    def __str__(self) -> str:
        if self.scheme is None:
            return self.host if self.port is None else f"{self.host}:{self.port}"
        return f"{self.scheme}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Target:
    """A concrete destination: scheme, lowercased host, effective port."""

    scheme: str
    host: str
    port: int

    @classmethod
    def parse(cls, url: str) -> Target | None:
        """Parse a destination; no ``://`` means ``http://``. Path/query are allowed (ignored).

        Only ``http``/``https`` are destinations (the peer client speaks HTTP); anything else is
        invalid rather than matched by a bare-host rule.
        """
        text = url.strip()
        if not text:
            return None
        if "://" not in text:
            text = "http://" + text
        parts = _url_parts(text)
        if parts is None:
            return None
        scheme, authority, _rest = parts
        if scheme not in DEFAULT_PORTS:
            return None
        hp = _host_port(authority)
        if hp is None:
            return None
        host, port = hp
        return cls(scheme, host, DEFAULT_PORTS[scheme] if port is None else port)


def covers(parent_rule: NetworkAllowRule, child_rule: NetworkAllowRule) -> bool:
    """Spawn-envelope coverage: hosts equal; a parent scheme/port, if set, must be the child's."""
    return parent_rule.covers(child_rule)


def _rules(entries: Iterable[str]) -> list[NetworkAllowRule]:
    return [r for r in map(NetworkAllowRule.parse, entries) if r is not None]


def allows(entries: Iterable[str], url: str) -> bool:
    """Whether a destination ``url`` is allowed by some valid entry; an invalid url never is."""
    target = Target.parse(url)
    if target is None:
        return False
    return any(r.matches(target) for r in _rules(entries))

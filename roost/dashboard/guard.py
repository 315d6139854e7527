"""Who may use the dashboard, decided without I/O: the token, the cookie, ``Host`` and ``Origin``.

Why each check (they are the Jupyter-notebook model, tightened):

* The URL printed at start carries a one-time-use-per-browser token; the page exchanges it for
  an HttpOnly, SameSite=Strict cookie and drops it from the address bar. Without the cookie or
  the token a request gets a bare 403: another local user who finds the port learns nothing.
* ``Host`` must name the loopback address and port the server listens on, so a page on another
  site whose DNS name is rebound to 127.0.0.1 is refused (its requests carry its own host name).
* State-changing requests must carry an ``Origin`` equal to ours and the per-run CSRF value the
  page embeds; SameSite=Strict alone would already keep the cookie off cross-site requests.

Tokens are compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field

from roost.core.authz import cross_site, netloc_key

__all__ = ["COOKIE", "CSRF_HEADER", "Guard"]

COOKIE = "roost_dashboard"
CSRF_HEADER = "X-Roost-CSRF"
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def _same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


@dataclass
class Guard:
    """The secrets of one dashboard run and the checks every request goes through."""

    port: int
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    session: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/?token={self.token}"

    def hosts(self) -> frozenset[str]:
        """``name:port`` of our listener, as :func:`roost.core.authz.netloc_key` writes them."""
        return frozenset(f"{name}:{self.port}" for name in _LOOPBACK_NAMES)

    def origins(self) -> frozenset[str]:
        return frozenset(f"http://{h}" for h in self.hosts())

    def host_ok(self, host: str | None) -> bool:
        """``Host`` must name our loopback address and port (the shared parsing of roost/core/authz.py)."""
        return host is not None and netloc_key(host) in self.hosts()

    def cross_site(self, origin: str | None, fetch_site: str | None) -> bool:
        """A foreign ``Origin`` or ``Sec-Fetch-Site: cross-site`` (roost/core/authz.py's one rule)."""
        return cross_site(origin, fetch_site, self.hosts())

    def token_ok(self, token: str | None) -> bool:
        return _same(token, self.token)

    def cookie_ok(self, cookie: str | None) -> bool:
        return _same(cookie, self.session)

    def origin_ok(self, origin: str | None) -> bool:
        """A state-changing request must come from our own page (browsers always send Origin on POST)."""
        return origin is not None and not cross_site(origin, None, self.hosts())

    def csrf_ok(self, value: str | None) -> bool:
        return _same(value, self.csrf)

    def cookie_header(self) -> str:
        return f"{COOKIE}={self.session}; HttpOnly; SameSite=Strict; Path=/"

"""Trusting the daemon's TLS certificate from a client: ``MURMUR_ROOST_CA`` / ``--ca``.

A daemon serving other hosts (``listen`` with ``tls_cert``) often has a certificate from a
private CA. Clients that reach it — ``roost-capsule`` on another node, a node keeper fetching
artifacts, ``roostctl doctor`` — verify it against the system's trust store plus, when given,
one CA file (PEM): the ``--ca`` flag, else ``$MURMUR_ROOST_CA``. Verification is never turned
off. A failed verification becomes one sentence saying what to set. docs/operations.md, "Network".

Stdlib only (``ssl``), so ``roostctl`` and ``roost-capsule`` pay nothing for it over plain HTTP:
a context is built only for an ``https://`` URL.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from typing import Final

__all__ = ["CA_ENV", "TrustError", "client_ssl_context", "context_for", "untrusted_sentence"]

CA_ENV: Final = "MURMUR_ROOST_CA"


class TrustError(ValueError):
    """The CA file cannot be used; the message is one sentence naming it."""


def client_ssl_context(
    ca: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> ssl.SSLContext:
    """A verifying client context: the system's trust store, plus ``ca`` (else ``$MURMUR_ROOST_CA``)."""
    e = os.environ if env is None else env
    path = os.fspath(ca) if ca is not None else (e.get(CA_ENV, "").strip() or None)
    ctx = ssl.create_default_context()
    if path is not None:
        try:
            ctx.load_verify_locations(cafile=path)
        except FileNotFoundError:
            raise TrustError(f"cannot read the CA file {path} (--ca / {CA_ENV}): no such file") from None
        except PermissionError:
            raise TrustError(f"cannot read the CA file {path} (--ca / {CA_ENV}): permission denied") from None
        except (ssl.SSLError, OSError):
            raise TrustError(f"the CA file {path} (--ca / {CA_ENV}) holds no PEM certificate") from None
    return ctx


def context_for(
    url: str | None, ca: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> ssl.SSLContext | None:
    """The context to reach ``url`` with: None for plain ``http://`` (nothing to load)."""
    if url is None or not url.lower().startswith("https://"):
        return None
    return client_ssl_context(ca, env)


def untrusted_sentence(exc: BaseException, url: str) -> str | None:
    """One sentence when ``exc`` (or its cause) is a failed certificate verification, else None."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        inner = getattr(seen, "certificate_error", None)  # aiohttp wraps the ssl module's error
        if isinstance(inner, BaseException):
            seen = inner
        if isinstance(seen, ssl.SSLCertVerificationError):
            why = getattr(seen, "verify_message", None) or "verification failed"
            return (
                f"the TLS certificate of mur-roost at {url} is not trusted ({why}): set {CA_ENV} "
                "(or pass --ca) to the PEM file of the CA that signed it"
            )
        nested = getattr(seen, "certificate_error", None) or getattr(seen, "os_error", None)
        seen = nested if isinstance(nested, BaseException) else (seen.__cause__ or seen.__context__)
    return None

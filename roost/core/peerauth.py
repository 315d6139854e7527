"""Operator-configured credentials for authenticated peers, and which one a peer's card selects (pure).

Why the daemon holds them: a capsule that held an API key, a bearer token or an OAuth client
secret could leak it; the relay adds the credential to the request itself, so capsules never see
one. The rules (docs/operations.md, "Authenticated peers"):

* The operator configures, per peer origin, the schemes it may answer with and their material
  (``peer_auth`` entries in the daemon's config); secrets live in files the daemon owns.
* The peer's card only *selects* among the schemes configured for its origin: the first entry
  whose scheme the card declares is used. Nothing the card says (a header name, a token URL)
  is ever used to decide where a secret goes.
* A secret is sent only to its configured origin (the selected interface's URL must be on it)
  and, for client credentials, to its configured token endpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from yarl import URL

__all__ = ["PeerAuthEntry", "origin_of", "select_entry"]

Scheme = Literal["api_key", "bearer", "oauth2_client_credentials"]
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def origin_of(url: str) -> str | None:
    """``scheme://host:port`` of an http(s) URL (the port explicit), or None."""
    try:
        parsed = URL(url)
    except ValueError:
        return None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return None
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host.lower()
    return f"{parsed.scheme}://{host}:{parsed.port}"


class PeerAuthEntry(BaseModel):
    """One scheme the daemon may answer a peer origin with (a ``[[peer_auth]]`` table)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    origin: str
    scheme: Scheme
    secret_file: Path
    """The API key, bearer token or client secret; a file the daemon's user owns, mode 0600 or stricter."""
    header: str | None = None
    """``api_key``: the header it is sent in."""
    client_id: str | None = None
    token_url: str | None = None
    scopes: tuple[str, ...] = ()

    @field_validator("origin")
    @classmethod
    def _origin(cls, v: str) -> str:
        origin = origin_of(v)
        if origin is None or URL(v).path not in ("", "/") or URL(v).query_string:
            raise ValueError(f"'{v}' is not an origin (http(s)://host[:port])")
        return origin

    @field_validator("secret_file")
    @classmethod
    def _absolute(cls, v: Path) -> Path:
        if not v.is_absolute():
            raise ValueError(f"secret_file '{v}' must be an absolute path")
        return v

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.scheme == "api_key" and (self.header is None or not _TOKEN.fullmatch(self.header)):
            raise ValueError(f"peer_auth for {self.origin}: api_key needs 'header', an HTTP header name")
        complete = self.client_id and self.token_url and origin_of(self.token_url) is not None
        if self.scheme == "oauth2_client_credentials" and not complete:
            raise ValueError(
                f"peer_auth for {self.origin}: oauth2_client_credentials needs 'client_id' and an http(s) 'token_url'"
            )
        return self


def select_entry(entries: Iterable[PeerAuthEntry], url: str, declared: frozenset[str]) -> PeerAuthEntry | None:
    """The configured entry to authenticate a request to ``url`` with: the first one for the
    URL's origin whose scheme the peer's card declares; None when there is none."""
    origin = origin_of(url)
    if origin is None:
        return None
    for entry in entries:
        if entry.origin == origin and entry.scheme in declared:
            return entry
    return None

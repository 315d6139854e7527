"""The daemon's exception tree; every refusal a client can see is one of these.

Each class carries its HTTP status, so the mapping to the wire lives in exactly one place
(``roost.http.middleware``): handlers raise, the middleware renders ``{"error": "<sentence>"}``.
Messages are sentences a person can act on and never contain a token (only its 16-hex id).
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "IDENTITY_REFUSAL",
    "BadGateway",
    "BadRequest",
    "CodedError",
    "Conflict",
    "Gone",
    "IdentityRefused",
    "Internal",
    "NotFound",
    "Refused",
    "RoostError",
    "Unavailable",
]

IDENTITY_REFUSAL = (
    "not authorised: this daemon answers only a credential it minted for a running session, "
    "and an approval it minted for that same session"
)


class RoostError(Exception):
    """Base of every error the daemon answers a client with."""

    default_status: ClassVar[int] = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def status(self) -> int:
        return self.default_status

    def body(self) -> dict[str, str]:
        return {"error": self.message}


class BadRequest(RoostError):
    default_status = 400


class Refused(RoostError):
    """A policy refusal (allow list, envelope, bound, approval state): 403 with its sentence.

    ``kind`` names the refusal class for logs and metrics (never shown to the client).
    """

    default_status = 403

    def __init__(self, message: str, kind: str = "policy") -> None:
        super().__init__(message)
        self.kind = kind


class IdentityRefused(Refused):
    """The one fixed identity refusal: byte-identical whatever the cause, so it is no oracle."""

    def __init__(self) -> None:
        super().__init__(IDENTITY_REFUSAL, kind="identity")


class NotFound(RoostError):
    default_status = 404


class Conflict(RoostError):
    default_status = 409


class Gone(RoostError):
    default_status = 410


class Unavailable(RoostError):
    default_status = 503


class BadGateway(RoostError):
    default_status = 502


class Internal(RoostError):
    default_status = 500


class CodedError(RoostError):
    """An error whose body is ``{"error": <code>, "message": <sentence>}`` (the peer plane's shape)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self._status = status

    @property
    def status(self) -> int:
        return self._status

    def body(self) -> dict[str, str]:
        return {"error": self.code, "message": self.message}

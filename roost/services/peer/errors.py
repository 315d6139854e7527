"""One exception tree for the peer plane: a :class:`PeerError` per wire code, mapped at the edge.

Why a tree of its own instead of raising :class:`roost.core.errors.CodedError` everywhere: the pure
and blocking layers (path rules, the fd-walking resolver, storage) must not know about HTTP, and
the mint/redeem/fetch layers need to record the same ``code`` and sentence in a trace line that
the client receives. A ``PeerError`` carries exactly that pair plus a status; :meth:`coded`
turns it into the daemon's ``{"error": code, "message": sentence}`` answer.

The sentences are upstream's error table, byte for byte, so a
fetcher written against upstream sees the same bodies. None of them interpolates anything a
caller controls except ``too_large`` (our own ceiling) and ``io_error`` (an errno name, never a
path). ``handle_not_valid`` is one fixed instance-independent body: it is the no-oracle answer.
"""

from __future__ import annotations

from roost.core.errors import CodedError

__all__ = [
    "BadPeerRequest",
    "HandleExpired",
    "HandleNotValid",
    "IoError",
    "MalformedHandle",
    "MethodNotAllowed",
    "MissingAudience",
    "NoPeerPlane",
    "NotARegularFile",
    "NotFound",
    "OutsideRoot",
    "PeerError",
    "SymlinkRefused",
    "TooLarge",
]


class PeerError(Exception):
    """A peer-plane refusal: a wire ``code``, an HTTP ``status`` and one sentence."""

    code: str = "io_error"
    status: int = 500
    default_message: str = "the peer plane could not complete this request"

    def __init__(self, message: str | None = None) -> None:
        self.message = message if message is not None else self.default_message
        super().__init__(self.message)

    def coded(self) -> CodedError:
        """The daemon error the HTTP middleware renders."""
        return CodedError(self.status, self.code, self.message)


class NoPeerPlane(PeerError):
    code = "no_peer_plane"
    status = 404
    default_message = "this capsule declares no exports.peer_files block, so it has no peer plane"


class MalformedHandle(PeerError):
    code = "malformed_handle"
    status = 400
    default_message = "the handle is not a well-formed mh1 token"


class MissingAudience(PeerError):
    code = "missing_audience"
    status = 400
    default_message = "a redeem must assert its audience in the x-murmur-audience header"


class HandleNotValid(PeerError):
    """Every MAC-class failure, whatever its cause; the body never varies (no oracle)."""

    code = "handle_not_valid"
    status = 403
    default_message = "the handle is not valid for this capsule"

    def __init__(self) -> None:
        super().__init__(None)


class HandleExpired(PeerError):
    code = "handle_expired"
    status = 410
    default_message = "the handle has expired"


class NotFound(PeerError):
    code = "not_found"
    status = 404
    default_message = "no such file under the peer export root"


class OutsideRoot(PeerError):
    code = "outside_root"
    status = 403
    default_message = "the handle names a path outside the peer export root"


class SymlinkRefused(PeerError):
    code = "symlink_refused"
    status = 403
    # Upstream's sentence: roost enforces the scoped rule (no link is ever followed) for every
    # session, so "the achieved containment class is scoped" is what the peer plane applies.
    default_message = "a symlink was encountered and the achieved containment class is scoped"


class NotARegularFile(PeerError):
    code = "not_a_regular_file"
    status = 403
    default_message = "the handle does not name a regular file"


class TooLarge(PeerError):
    code = "too_large"
    status = 413

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"file exceeds the declared exports.peer_files.max_bytes of {max_bytes} bytes")


class MethodNotAllowed(PeerError):
    code = "method_not_allowed"
    status = 405
    default_message = "the peer plane serves GET only; it has no write path and no list verb"


class IoError(PeerError):
    code = "io_error"
    status = 500

    def __init__(self, detail: str) -> None:
        super().__init__(f"read failed: {detail}")


class BadPeerRequest(PeerError):
    """A request the peer plane cannot act on (body shape, policy, audience); code and status given."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code

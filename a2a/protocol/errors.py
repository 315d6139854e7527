"""One exception tree for the A2A client and door, plus the JSON-RPC error catalogue.

Why one tree: the roost relay maps every A2A failure to one HTTP answer at its edge, and the
door maps every refusal to one JSON-RPC error object. Both need a single base class to catch and
exact, stable sentences to show. Messages here never carry request headers or bodies: those may
hold tokens.
"""

from __future__ import annotations

# JSON-RPC 2.0 standard codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# A2A codes.
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
COMPLETION_MISADDRESSED = -32004  # murmur era B reuses A2A's UnsupportedOperation code
CONTENT_TYPE_NOT_SUPPORTED = -32005
VERSION_NOT_SUPPORTED = -32009


class A2AError(Exception):
    """Base of every error this package raises."""


class JsonRpcError(A2AError):
    """A JSON-RPC error object: raised by the door's handlers, and by the client on an error answer.

    ``url`` is set on the client side only; it turns the sentence into
    ``A2A error from <url>: <code> <message>``.
    """

    def __init__(self, code: int, message: str, data: object = None, *, url: str | None = None) -> None:
        self.code = code
        self.message = message
        self.data = data
        self.url = url
        super().__init__(self._sentence())

    def _sentence(self) -> str:
        if self.url is None:
            return f"{self.code} {self.message}"
        return f"A2A error from {self.url}: {self.code} {self.message}"

    def to_object(self) -> dict[str, object]:
        """The wire error object: exactly ``{code, message[, data]}``."""
        obj: dict[str, object] = {"code": self.code, "message": self.message}
        if self.data is not None:
            obj["data"] = self.data
        return obj


class PeerUnreachable(A2AError):
    """No HTTP answer at all: refused connection, DNS failure, timeout, reset."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"could not reach {url}: {reason}")


class PeerHTTPError(A2AError):
    """The peer answered with a non-2xx HTTP status (a JSON-RPC error always travels with 200)."""

    def __init__(self, url: str, status: int, message: str, error_code: str | None = None) -> None:
        self.url = url
        self.status = status
        self.error_code = error_code
        self.message = message
        tag = f"{status} {error_code}" if error_code else str(status)
        super().__init__(f"peer at {url} refused the message ({tag}): {message}")


class InvalidResponse(A2AError):
    """The peer answered 2xx but the body is not a usable JSON-RPC response."""

    def __init__(self, url: str, detail: str, *, sentence: str | None = None) -> None:
        self.url = url
        self.detail = detail
        super().__init__(sentence or f"failed to parse response from {url}: {detail}")


class NoResult(InvalidResponse):
    """A JSON-RPC response with neither ``result`` nor ``error``."""

    def __init__(self, url: str) -> None:
        super().__init__(url, "no result", sentence=f"no result in A2A response from {url}")


class UnsupportedPeerURL(A2AError):
    """A peer URL this client refuses to dial (https, other schemes, no host)."""


# ---------------------------------------------------------------------------------------------
# Error constructors with the exact sentences peers and the official SDK expect.


def parse_error() -> JsonRpcError:
    return JsonRpcError(PARSE_ERROR, "Parse error")


def invalid_request(detail: str | None = None) -> JsonRpcError:
    return JsonRpcError(INVALID_REQUEST, f"Invalid Request: {detail}" if detail else "Invalid Request")


def method_not_found() -> JsonRpcError:
    return JsonRpcError(METHOD_NOT_FOUND, "Method not found")


def invalid_params(detail: str) -> JsonRpcError:
    return JsonRpcError(INVALID_PARAMS, f"Invalid params: {detail}")


def internal_error() -> JsonRpcError:
    return JsonRpcError(INTERNAL_ERROR, "internal error")


def task_not_found() -> JsonRpcError:
    return JsonRpcError(TASK_NOT_FOUND, "Task not found")


def task_not_cancelable(task_id: str, state: str) -> JsonRpcError:
    return JsonRpcError(TASK_NOT_CANCELABLE, f"task {task_id} is already {state} and cannot be canceled")


def completion_misaddressed(session: str | None) -> JsonRpcError:
    addressed = session if session else "<unaddressed>"
    return JsonRpcError(
        COMPLETION_MISADDRESSED,
        f"completion is addressed to session {addressed}, which is not the session running here",
    )


def content_type_not_supported(detail: str) -> JsonRpcError:
    return JsonRpcError(CONTENT_TYPE_NOT_SUPPORTED, f"Content type not supported: {detail}")


def version_not_supported(requested: str) -> JsonRpcError:
    return JsonRpcError(
        VERSION_NOT_SUPPORTED, f"A2A version '{requested}' is not supported; this agent speaks 1.0 and 0.3"
    )


def version_header_required(method: str, requested: str | None) -> JsonRpcError:
    got = f"'{requested}'" if requested else "none"
    return JsonRpcError(
        VERSION_NOT_SUPPORTED,
        f"method {method} is an A2A 1.0 method and needs the header A2A-Version: 1.0 (got {got})",
    )


PUSH_NOTIFICATION_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED = -32007  # A2A 0.3 only; 1.0 answers -32004 for a card that has none


def unsupported_operation(detail: str) -> JsonRpcError:
    return JsonRpcError(UNSUPPORTED_OPERATION, f"Unsupported operation: {detail}")


def push_notification_not_supported() -> JsonRpcError:
    return JsonRpcError(
        PUSH_NOTIFICATION_NOT_SUPPORTED,
        "Push notifications are not supported: this agent's card declares pushNotifications false",
    )


def authenticated_extended_card_not_configured() -> JsonRpcError:
    """The 0.3 answer to ``agent/getAuthenticatedExtendedCard`` when the card declares none (as the
    0.3 specification and the official 0.3 SDK servers answer it)."""
    return JsonRpcError(
        AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED,
        "Authenticated Extended Card is not configured: this agent's card declares no extended agent card",
    )

"""roostctl's failures and the exit code each maps to (what scripts may rely on).

0 ok · 1 refused or failed · 2 usage · 3 daemon unreachable.
"""

from __future__ import annotations

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE", "ApiError", "CtlError", "Unreachable", "Usage"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


class CtlError(Exception):
    """A failure with its stable ``code`` (for the ``--json`` envelope) and exit status."""

    code = "failed"
    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        if code is not None:
            self.code = code

    def envelope(self) -> dict[str, object]:
        err: dict[str, object] = {"code": self.code, "message": self.message, "exit": self.exit_code}
        if self.status is not None:
            err["http_status"] = self.status
        return {"error": err}


class ApiError(CtlError):
    """The daemon answered with an error status; ``message`` is its sentence."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        default = {400: "bad_request", 403: "refused", 404: "not_found", 409: "conflict", 503: "unavailable"}
        super().__init__(message, status=status, code=code or default.get(status, "failed"))


class Unreachable(CtlError):
    code = "unreachable"
    exit_code = EXIT_UNREACHABLE


class Usage(CtlError):
    code = "usage"
    exit_code = EXIT_USAGE

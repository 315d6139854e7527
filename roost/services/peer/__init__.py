"""Peer plane: HMAC peer-file handles minted, redeemed and fetched by the daemon."""

from __future__ import annotations

from typing import Any

__all__ = ["span_attrs"]


def span_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """Span attributes with dotted keys (``roost.peer.*``), which cannot be keyword arguments.

    Typed ``dict[str, Any]`` so ``**`` expansion into ``EventBus.start`` type-checks.
    """
    return attrs

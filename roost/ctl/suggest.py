"""“Did you mean …?” for mistyped verbs and capsule names (stdlib ``difflib``, no I/O)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["close_matches", "did_you_mean"]


def close_matches(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The choices most like ``word``, best first (case-insensitive; a prefix counts too)."""
    pool = sorted(set(choices))
    lowered = {c.lower(): c for c in pool}
    hits = [lowered[m] for m in difflib.get_close_matches(word.lower(), list(lowered), n=n, cutoff=0.6)]
    if word and len(hits) < n:
        hits += [c for c in pool if c.lower().startswith(word.lower()) and c not in hits][: n - len(hits)]
    return hits


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'status'?"`` (or ``'a' or 'b'``), or "" when nothing is close."""
    hits = close_matches(word, choices)
    if not hits:
        return ""
    return "; did you mean " + " or ".join(f"'{h}'" for h in hits) + "?"

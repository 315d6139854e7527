"""The per-user registrations-per-minute window (``uid_registrations_per_minute``).

Pure: the caller passes the clock's reading. One deque of timestamps per uid, trimmed to the
last minute on each check; users idle for a minute are forgotten once many are held.
"""

from __future__ import annotations

from collections import deque

__all__ = ["WINDOW_MS", "RegistrationRate"]

WINDOW_MS = 60_000
_FORGET_PAST = 4096


class RegistrationRate:
    def __init__(self) -> None:
        self._stamps: dict[int | None, deque[int]] = {}

    def admit(self, uid: int | None, now_ms: int, limit: int) -> bool:
        """Whether ``uid`` may register at ``now_ms`` (fewer than ``limit`` in the last minute);
        records the registration if so. ``limit <= 0`` admits everyone and records nothing."""
        if limit <= 0:
            return True
        stamps = self._stamps.get(uid)
        if stamps is None:
            if len(self._stamps) > _FORGET_PAST:  # forget idle users' empty windows
                for key in [k for k, v in self._stamps.items() if not v or v[-1] <= now_ms - WINDOW_MS]:
                    del self._stamps[key]
            stamps = self._stamps[uid] = deque()
        while stamps and stamps[0] <= now_ms - WINDOW_MS:
            stamps.popleft()
        if len(stamps) >= limit:
            return False
        stamps.append(now_ms)
        return True

    def give_back(self, uid: int | None, stamp_ms: int) -> None:
        """Un-record a registration :meth:`admit` recorded at ``stamp_ms`` (it was refused after
        all, e.g. as a duplicate), so a refused attempt does not use up the user's minute."""
        stamps = self._stamps.get(uid)
        if stamps is not None and stamp_ms in stamps:
            stamps.remove(stamp_ms)

    def __len__(self) -> int:
        """How many users' windows are held."""
        return len(self._stamps)

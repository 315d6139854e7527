"""Which process a pid names: its start time in clock ticks since boot, never the wall clock.

A recorded pid is only believed together with the moment its process started, so that a pid
reused by a later process is told apart (a re-adopted child after a daemon restart, a session's
registered process). That moment is field 22 of ``/proc/<pid>/stat``: clock ticks since boot,
which the kernel fixes when the process starts and no clock step can move. ``psutil``'s
``create_time`` is that same count plus the boot time in seconds since the epoch, which the
kernel derives from the wall clock each time it is read: a wall-clock jump (an NTP step, a
suspended VM) moves it, and then a live child looks like a stranger (and is killed as a
leftover) or the other way round.

Records written before this rule hold ``create_time`` (seconds since the epoch) in the same
field; :func:`same_process` still recognises them by the old comparison, once, so a daemon
upgraded while children run re-adopts them. docs/operations.md, "Restart".
"""

from __future__ import annotations

import psutil

__all__ = ["process_identity", "process_owner", "same_process", "start_ticks"]

# The old rule's tolerance: psutil's create time is rounded to the clock tick (10 ms).
_LEGACY_TOLERANCE_SECS = 0.01


def _stat_fields(pid: int) -> list[bytes] | None:
    """Blocking: the fields of ``/proc/<pid>/stat`` after the command name, or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ")": cut after the last.
    return raw[raw.rfind(b")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """Blocking: when process ``pid`` started, in clock ticks since boot (None if it is gone)."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def process_identity(pid: int | None) -> float | None:
    """Blocking: the start value to record beside ``pid`` (its start ticks; a float, for the
    records' REAL columns, exact for any tick count), or None when there is no such process."""
    if pid is None or pid <= 0:
        return None
    ticks = start_ticks(pid)
    return float(ticks) if ticks is not None else None


def same_process(pid: int | None, recorded: float | None) -> bool:
    """Blocking: is ``pid`` still the live (not zombie) process whose start was ``recorded``?"""
    if pid is None or pid <= 0 or recorded is None:
        return False
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] == b"Z":
        return False
    try:
        if int(fields[19]) == recorded:
            return True
    except ValueError:
        return False
    # A record from before the ticks rule: its create time, compared as it was then.
    try:
        return abs(psutil.Process(pid).create_time() - recorded) <= _LEGACY_TOLERANCE_SECS
    except psutil.Error:
        return False


def process_owner(pid: int) -> int | None:
    """Blocking: the real uid of process ``pid`` (None if there is no such process)."""
    try:
        return int(psutil.Process(pid).uids().real)
    except (psutil.Error, OSError):
        return None

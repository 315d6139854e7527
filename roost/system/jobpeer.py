"""Whether the process behind a connection belongs to a job (or to a capsule's entrypoint).

Why: Landlock (at the ABI this host has) does not govern connecting to a pathname unix socket
that already exists, and a uid-0 capsule is still uid 0, so a socket's ``SO_PEERCRED`` uid alone
cannot tell the operator's ``roostctl`` from a hostile capsule that found ``admin.sock``. The
peer's *process* can: it belongs to a job when its cgroup lies under the jobs' cgroup root or,
without job cgroups, when its ancestry reaches a job's root process (each capsule host is a
child subreaper, so its entrypoints' descendants stay below it however they fork). The answer
is pinned with a pidfd: a peer that exits while it is being judged is refused, never mistaken
for the process that may reuse its pid. docs/security.md, "Who may call what".

Blocking (reads under ``/proc``); the daemon calls it through its executor.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
from collections.abc import Collection
from pathlib import Path

from roost.system.peercred import unix_peer

__all__ = [
    "ancestor_in",
    "ancestry_reaches",
    "descends_from",
    "peer_pid",
    "process_in_job",
    "socket_in_job",
    "socket_job_root",
]


def peer_pid(sock: socket.socket | None) -> int | None:
    """The pid at the other end of a unix socket (``SO_PEERCRED``), or None."""
    found = unix_peer(sock)
    return found[0] if found is not None and found[0] > 0 else None


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def ancestor_in(pid: int, roots: Collection[int]) -> int | None:
    """The first of ``roots`` on ``pid``'s parent links (itself included, up to pid 1), or None."""
    seen = 0
    current: int | None = pid
    while current is not None and current > 1 and seen < 4096:
        if current in roots:
            return current
        current = _ppid(current)
        seen += 1
    return None


def ancestry_reaches(pid: int, roots: Collection[int]) -> bool:
    """Whether ``pid`` is one of ``roots`` or descends from one."""
    return ancestor_in(pid, roots) is not None


def _v2_mount() -> str | None:
    try:
        text = Path("/proc/self/mounts").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return fields[1]
    return None


def _in_cgroup_root(pid: int, root: Path | None) -> bool:
    mount = _v2_mount() if root is not None else None
    if mount is None or root is None:
        return False
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("0::"):
            where = Path(mount) / line[3:].lstrip("/")
            return where == root or where.is_relative_to(root)
    return False


def _alive(pidfd: int) -> bool:
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return not poller.poll(0)


def process_in_job(pid: int | None, roots: Collection[int], *, cgroup_root: Path | None = None) -> bool:
    """Whether the process ``pid`` belongs to a job: under the jobs' cgroup root, or below a job's
    root process. An unknown pid, or one that exits while it is judged, counts as inside."""
    if pid is None:
        return True
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return True
    try:
        inside = _in_cgroup_root(pid, cgroup_root) or ancestry_reaches(pid, roots)
        return inside or not _alive(pidfd)
    finally:
        os.close(pidfd)


def descends_from(pid: int | None, roots: Collection[int]) -> int | None:
    """The one of ``roots`` that ``pid`` is or descends from, if ``pid`` stays alive while it is
    judged (pinned by a pidfd); else None."""
    if pid is None or not roots:
        return None
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        found = ancestor_in(pid, roots)
        return found if found is not None and _alive(pidfd) else None
    finally:
        os.close(pidfd)


def _children() -> dict[int, list[int]]:
    """Every process's children (one pass over /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        parent = _ppid(int(entry))
        if parent is not None:
            children.setdefault(parent, []).append(int(entry))
    return children


def _tree(root: int, children: dict[int, list[int]]) -> list[int]:
    """``root`` and every process below it."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _holds(pid: int, target: str) -> bool:
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return True
    return False


def socket_job_root(inode: int, roots: Collection[int]) -> int | None:
    """The one of ``roots`` whose process tree holds the socket ``inode`` (the other end of a TCP
    connection, found by sock_diag), or None."""
    if not roots:
        return None
    target = f"socket:[{inode}]"
    children = _children()
    for root in roots:
        if any(_holds(pid, target) for pid in _tree(root, children)):
            return root
    return None


def socket_in_job(inode: int | None, roots: Collection[int]) -> bool:
    """Whether a process of a job (below one of ``roots``) holds the socket ``inode``. An unknown
    inode counts as inside."""
    return inode is None or socket_job_root(inode, roots) is not None

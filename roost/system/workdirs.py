"""Workdirs belong to their caller: ssh's StrictModes rule, and "could this uid read it?".

A session names a workdir; the daemon (often root) then writes records into it, serves files
out of it and launches children in it. So a workdir is accepted only if it is an existing
directory owned by the caller's uid and no component of its path can be replaced by another
uid: every directory from ``/`` down is owned by root or the caller and is not writable by
group or others — except a sticky directory such as ``/tmp``, where others cannot rename or
remove what they do not own. No component may be a symbolic link (its target could change
after the check). The daemon writes its records into ``<workdir>/.murmur``, so a ``.murmur``
that is already there must be a real directory of the caller (or root): a planted link (to
``/etc``, say) is refused at registration, not at the first write. The refusal names the
component that is wrong. docs/security.md.

:func:`may_access` is the pure permission rule used on opened descriptors (redeem, fetch):
would ``uid`` with groups ``gids`` be allowed ``want`` on a file with this stat?
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection

from roost.core.errors import BadRequest, Refused
from roost.core.fields import not_absolute

__all__ = [
    "NOT_A_DIRECTORY",
    "WorkdirRefused",
    "check_workdir",
    "from_verdict",
    "groups_of",
    "may_access",
    "registered_workdir",
    "workdir_problem",
    "workdir_verdict",
]

NOT_A_DIRECTORY = "workdir must be an existing directory"

R_OK, W_OK, X_OK = 4, 2, 1


class WorkdirRefused(Refused):
    """403: the named workdir does not belong to the caller."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "workdir")


def may_access(st: os.stat_result, uid: int, gids: Collection[int], want: int) -> bool:
    """Would ``uid`` (in groups ``gids``) get ``want`` (R_OK|W_OK|X_OK bits) on this file?"""
    if uid == 0:
        # Root reads and writes anything; executes only what someone may execute.
        return not (want & X_OK) or stat.S_ISDIR(st.st_mode) or bool(st.st_mode & 0o111)
    mode = st.st_mode
    if st.st_uid == uid:
        bits = (mode >> 6) & 7
    elif st.st_gid in gids:
        bits = (mode >> 3) & 7
    else:
        bits = mode & 7
    return bits & want == want


def groups_of(uid: int) -> frozenset[int]:
    """The primary and supplementary gids of ``uid`` (just the uid's primary gid if unknown)."""
    import pwd

    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return frozenset()
    try:
        return frozenset(os.getgrouplist(pw.pw_name, pw.pw_gid))
    except OSError:
        return frozenset({pw.pw_gid})


def _component_problem(path: str, st: os.stat_result, uid: int, *, last: bool) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return (
            f"the workdir path component {path} is a symbolic link, which another user could repoint; "
            "name the real directory"
        )
    if not stat.S_ISDIR(st.st_mode):
        return f"the workdir path component {path} is not a directory"
    if last:
        if st.st_uid != uid:
            return f"the workdir {path} belongs to uid {st.st_uid}, not to the calling uid {uid}"
        if st.st_mode & 0o022:
            return (
                f"the workdir {path} is writable by group or others, so another user could replace "
                f"what roost writes there; chmod go-w {path}"
            )
        return None
    if st.st_uid not in (0, uid):
        return (
            f"the workdir path component {path} belongs to uid {st.st_uid}, which could replace "
            "the directories under it; use a path owned by root or by you"
        )
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return (
            f"the workdir path component {path} is writable by group or others and not sticky, "
            "so another user could replace the directories under it"
        )
    return None


def _records_dir_problem(path: str, uid: int) -> str | None:
    """Blocking: why the workdir's existing ``.murmur`` at ``path`` may not take roost's records."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None  # roost creates it, beneath the checked workdir, following no link
    except OSError as exc:
        return f"the workdir's {path} cannot be examined: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return (
            f"the workdir's {path} is a symbolic link, which could send roost's records elsewhere; "
            "remove it and let roost create the directory"
        )
    if not stat.S_ISDIR(st.st_mode):
        return f"the workdir's {path} is not a directory"
    if st.st_uid not in (0, uid):
        return f"the workdir's {path} belongs to uid {st.st_uid}, not to the calling uid {uid}"
    return None


def workdir_problem(workdir: str, uid: int) -> str | None:
    """Blocking: why ``workdir`` may not be used by ``uid`` (a sentence), or None if it may."""
    if not os.path.isabs(workdir):
        return not_absolute("workdir")
    parts = [p for p in os.path.normpath(workdir).split("/") if p]
    current = "/"
    chain = [current]
    for p in parts:
        current = os.path.join(current, p)
        chain.append(current)
    for i, path in enumerate(chain):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return f"the workdir {workdir} does not exist (no {path})"
        except OSError as exc:
            return f"the workdir path component {path} cannot be examined: {exc.strerror or exc}"
        problem = _component_problem(path, st, uid, last=i == len(chain) - 1)
        if problem is not None:
            return problem
    return _records_dir_problem(os.path.join(current, ".murmur"), uid)


def check_workdir(workdir: str, uid: int | None) -> str:
    """Blocking: the normalised workdir if ``uid`` may use it, else :class:`WorkdirRefused`."""
    if uid is None:
        raise WorkdirRefused(
            "roost cannot tell which user is calling (not a connection from this host), "
            "so it accepts no workdir from this caller"
        )
    problem = workdir_problem(workdir, uid)
    if problem is not None:
        raise WorkdirRefused(problem)
    return os.path.normpath(workdir)


def registered_workdir(workdir: str, uid: int | None) -> str:
    """Blocking: the ``/register`` check, run on the host where the session runs (the daemon's,
    or a Ray node's keeper for a child placed there): an existing directory (else 400), then
    :func:`check_workdir`. The normalised workdir, or the refusal."""
    if not os.path.isdir(workdir):
        raise BadRequest(NOT_A_DIRECTORY)
    return check_workdir(workdir, uid)


def workdir_verdict(workdir: str, uid: int | None) -> tuple[str, str]:
    """Blocking: :func:`registered_workdir` as plain values for a remote call: ``("ok", workdir)``,
    ``("bad", sentence)`` (400) or ``("refused", sentence)`` (403)."""
    try:
        return "ok", registered_workdir(workdir, uid)
    except WorkdirRefused as exc:
        return "refused", exc.message
    except BadRequest as exc:
        return "bad", exc.message


def from_verdict(verdict: object) -> str:
    """The workdir a :func:`workdir_verdict` accepted, else the same error it stands for."""
    if isinstance(verdict, (tuple, list)) and len(verdict) == 2 and all(isinstance(v, str) for v in verdict):
        kind, text = verdict
        if kind == "ok":
            return str(text)
        if kind == "bad":
            raise BadRequest(str(text))
        if kind == "refused":
            raise WorkdirRefused(str(text))
    raise WorkdirRefused("the workdir could not be checked where the session runs (an unreadable answer)")

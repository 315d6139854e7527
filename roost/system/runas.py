"""``run_as``: the unprivileged user an operator's jobs run as, and whether it can reach a launch.

Why a check before the start: a job whose interpreter, virtual environment or workdir its user
cannot reach would fail somewhere inside the child (a ``Permission denied`` from the exec step,
a host that cannot write its records) with a sentence about the symptom. The launch is refused
up front instead, with one sentence naming the path and the user. The rule is the kernel's
(:func:`roost.system.workdirs.may_access` on each component's mode, owner and group), judged for
the user's uid and groups; blocking (``stat`` and passwd lookups): call through the executor.
docs/security.md, "Which uid and privileges a job has".
"""

from __future__ import annotations

import functools
import os
import pwd

from roost.system.workdirs import R_OK, W_OK, X_OK, groups_of, may_access

__all__ = ["RunAsError", "reach_problem", "resolve_user", "venv_of"]


class RunAsError(ValueError):
    """The ``run_as`` user does not exist; the message is one sentence."""


@functools.lru_cache(maxsize=64)
def resolve_user(name: str) -> int:
    """The uid of ``name`` (a user name or a number)."""
    text = name.strip()
    if text.isdigit():
        return int(text)
    try:
        return pwd.getpwnam(text).pw_uid
    except KeyError:
        raise RunAsError(f"run_as names the user '{text}', which does not exist on this host") from None


def venv_of(interpreter: str) -> str | None:
    """The virtual environment an interpreter lives in (its ``bin``'s parent holds ``pyvenv.cfg``)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(interpreter)))
    return root if os.path.isfile(os.path.join(root, "pyvenv.cfg")) else None


def _walk_problem(path: str, uid: int, gids: frozenset[int], last: int, what: str) -> str | None:
    parts = [p for p in os.path.abspath(path).split("/") if p]
    current = "/"
    for i, name in enumerate(["", *parts]):
        current = os.path.join(current, name) if name else "/"
        try:
            st = os.stat(current)
        except OSError as exc:
            return f"its {what} {path} cannot be examined ({exc.strerror or exc})"
        want = last if i == len(parts) else X_OK
        if not may_access(st, uid, gids, want):
            return f"uid {uid} cannot {'reach' if want == X_OK else 'use'} {current}, on the way to its {what} {path}"
    return None


def reach_problem(uid: int, *, interpreter: str | None, workdir: str | None) -> str | None:
    """Why ``uid`` cannot run a job whose command is ``interpreter`` in ``workdir`` (a sentence
    fragment), or None: the interpreter executable, its virtual environment readable, the workdir
    (or, when it does not exist yet, its parent) searchable and writable."""
    gids = groups_of(uid)
    if interpreter is not None:
        problem = _walk_problem(interpreter, uid, gids, X_OK | R_OK, "interpreter")
        venv = venv_of(interpreter)
        if problem is None and venv is not None:
            problem = _walk_problem(venv, uid, gids, R_OK | X_OK, "virtual environment")
        if problem is not None:
            return problem
    if workdir is not None:
        if os.path.exists(workdir):
            return _walk_problem(workdir, uid, gids, X_OK | W_OK, "workdir")
        # Not made yet: the daemon makes it and gives it to the user, who must reach it.
        return _walk_problem(os.path.dirname(workdir.rstrip("/")), uid, gids, X_OK, "workdir")
    return None

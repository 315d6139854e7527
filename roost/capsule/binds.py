"""The read-only part of a ``sealed`` root: every granted path visible at its own place.

Why a module of its own: bubblewrap builds the sandbox's root from nothing, one argument at a
time, and a path that is a symbolic link (a virtual environment's ``bin/python3``, ``/lib64``)
cannot be bound as it is — binding onto a link follows it inside a root where its target does
not exist ("Can't create file at …"). So each granted path is walked component by component:
every symbolic link on the way is recreated as a link (``--symlink``), and what it finally names
is bound read-only at its real place (``--ro-bind-try``); a path inside a directory already bound
is not bound again (it is there, with its links), and bubblewrap makes the parent directories of
whatever it binds or links. The result names the real files the interpreter chain runs from and
nothing else (roost/capsule/interpreters.py says what that chain is).

Blocking (``lstat``/``readlink``): called where the sandbox's command line is built.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable

__all__ = ["readonly_binds"]

_MAX_LINKS = 40


def _walk(path: str, links: dict[str, str]) -> str:
    """Record every symbolic link on ``path``'s way (``links``) and return its real path."""
    parts = [p for p in os.path.normpath(path).split("/") if p]
    here = "/"
    followed = 0
    while parts:
        step = os.path.join(here, parts.pop(0))
        if os.path.islink(step) and followed < _MAX_LINKS:
            target = os.readlink(step)
            links.setdefault(step, target)
            followed += 1
            resolved = os.path.normpath(os.path.join(here, target))
            parts = [p for p in resolved.split("/") if p] + parts
            here = "/"
            continue
        here = step
    return here


def _inside(path: str, dirs: Iterable[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


def readonly_binds(paths: Iterable[str], *, made: Collection[str] = ()) -> list[str]:
    """bubblewrap arguments making each path (and every link on its way) visible read-only;
    ``made``: links the caller has recreated already (merged-/usr's ``/bin``…), not made again."""
    links: dict[str, str] = {}
    real: set[str] = set()
    for p in paths:
        if not p or p.startswith(("/proc", "/dev")):
            continue
        real.add(_walk(p, links))
    out: list[str] = []
    bound: list[str] = []
    for p in sorted(real, key=lambda r: (r.count("/"), r)):  # parents before what lies inside them
        if _inside(p, bound):
            continue
        if os.path.isdir(p):
            bound.append(p)
        out += ["--ro-bind-try", p, p]
    for link in sorted(links, key=lambda r: (r.count("/"), r)):
        if link in made:
            continue
        if _inside(link, bound) or _inside(link, [k for k in links if k != link and os.path.isdir(k)]):
            continue  # already there, as part of a directory bound (or linked) above it
        out += ["--symlink", links[link], link]
    return out

"""What really runs when a capsule names an interpreter: symlinks followed, shims asked.

Why: the most common Python setups are not a binary in ``/usr/bin``. A pyenv ``python3`` on
``PATH`` is a shell script (a *shim*) that runs pyenv's own scripts to pick a version; a virtual
environment's ``python3`` is a symlink into another tree, whose ``pyvenv.cfg`` and
``site-packages`` sit beside it. Under ``scoped`` (Landlock) and ``sealed`` (bubblewrap) a file is
executed or read only if it was granted, so a grant for the name alone either lets nothing run
(the shim's ``libexec/pyenv`` is not executable there: exit 126) or lets too much in.

So a command is resolved to the files the kernel actually executes and the directories the
interpreter actually reads, and nothing more (docs/security.md, "Containment"):

* a **symlink** is followed hop by hop; every hop and the final file are in the chain (a venv's
  ``bin/python3`` stays what is run, so Python still finds its ``pyvenv.cfg``);
* a **shim** of a version manager (a script whose last word is ``exec <manager> exec <program>``:
  pyenv, rbenv, nodenv, asdf…) is *asked* for its real target (``<manager> which <program>``),
  and the target is run instead of the shim — the manager's own scripts are never granted;
* a **script** keeps its ``#!`` interpreter (through ``env``) in the chain;
* what the chain reads: the ``lib`` directory beside the final binary's ``bin`` (the
  interpreter's standard library and ``libpython``) and a virtual environment's ``pyvenv.cfg``
  and ``lib`` — not its ``bin``, whose programs the dynamic loader could run.

A shim nothing can ask refuses the launch before it starts (:class:`Unrunnable`), with one
sentence naming the resolved path and the manifest change that fixes it.

Blocking (reads files, may run the manager once): call it before the event loop starts, or in a
thread.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Resolved", "Unrunnable", "resolve", "shim_manager", "unrunnable_sentence"]

_SHIM_EXEC = re.compile(r'^\s*exec\s+"?(?P<manager>[^"\s]+)"?\s+exec\s+', re.MULTILINE)
_ROOT_EXPORT = re.compile(r'^\s*export\s+(?P<name>[A-Z]+_ROOT)="(?P<value>[^"$]*)"', re.MULTILINE)
ASK_TIMEOUT_SECS = 10.0
_MAX_HOPS = 40
_SYSTEM = ("/usr/", "/lib/", "/lib64/", "/bin/", "/sbin/")


class Unrunnable(Exception):
    """A command whose real program cannot be found; ``path`` is what it resolved to."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(why)
        self.path = path
        self.why = why


@dataclass(slots=True)
class Resolved:
    """``run``: what to execute; ``exec_files``: every file the kernel executes to run it;
    ``read``: the directories it reads; ``via``: the shim it replaced (None: none)."""

    run: str
    exec_files: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    via: str | None = None


def _head(path: str, size: int = 4096) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return b""


def _hops(path: str) -> list[str]:
    """``path``, then each symlink hop's target, ending at the real file."""
    out = [os.path.abspath(path)]
    seen = 0
    while os.path.islink(out[-1]) and seen < _MAX_HOPS:
        target = os.readlink(out[-1])
        out.append(os.path.normpath(os.path.join(os.path.dirname(out[-1]), target)))
        seen += 1
    real = os.path.realpath(path)
    if real not in out:
        out.append(real)  # a symlinked directory on the way
    return out


def shim_manager(path: str) -> tuple[str, dict[str, str]] | None:
    """When ``path`` is a version manager's shim: the manager to ask and the ``*_ROOT`` it exports."""
    head = _head(path)
    if not head.startswith(b"#!"):
        return None
    text = head.decode("utf-8", "replace")
    m = _SHIM_EXEC.search(text)
    if m is None:
        return None
    roots = {r["name"]: r["value"] for r in _ROOT_EXPORT.finditer(text)}
    return m["manager"], roots


def _ask(manager: str, program: str, roots: Mapping[str, str], env: Mapping[str, str]) -> str:
    """``<manager> which <program>``: the shim's real target (raises :class:`Unrunnable`)."""
    if "$" in manager or (not os.path.isabs(manager) and shutil.which(manager, path=env.get("PATH")) is None):
        raise Unrunnable(manager, "its version manager cannot be run to ask which program it starts")
    run_env = {**env, **roots}
    try:
        out = subprocess.run(
            [manager, "which", program],
            capture_output=True,
            text=True,
            timeout=ASK_TIMEOUT_SECS,
            env=run_env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise Unrunnable(manager, f"asking '{manager} which {program}' failed: {exc}") from None
    target = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if out.returncode != 0 or not os.path.isabs(target) or not os.path.isfile(target):
        raise Unrunnable(manager, f"'{os.path.basename(manager)} which {program}' named no program")
    return target


def _shebang(path: str, path_env: str) -> list[str]:
    head = _head(path, 256)
    if not head.startswith(b"#!"):
        return []
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return []
    chain = [words[0]]
    if os.path.basename(words[0]) == "env":
        rest = [w for w in words[1:] if not w.startswith("-")]
        found = shutil.which(rest[0], path=path_env) if rest else None
        if found:
            chain.append(found)
    return chain


def _reads(hops: list[str]) -> list[str]:
    """What an interpreter reads: the ``lib`` beside the ``bin`` of the final file (outside the
    system directories, which are read anyway) and a virtual environment's ``pyvenv.cfg`` and
    ``lib``/``lib64`` — never a ``bin``, whose programs the dynamic loader could run once readable."""
    out: list[str] = []
    first = hops[0]
    venv = Path(first).parent.parent
    if (venv / "pyvenv.cfg").is_file():
        out.append(str(venv / "pyvenv.cfg"))
        out += [str(venv / d) for d in ("lib", "lib64") if (venv / d).is_dir()]
    for hop in hops:
        bindir = Path(hop).parent
        if bindir.name == "bin" and not hop.startswith(_SYSTEM):
            lib = bindir.parent / "lib"
            if lib.is_dir() and str(lib) not in out:
                out.append(str(lib))
    return out


def resolve(command: str, path_env: str, env: Mapping[str, str] | None = None) -> Resolved | None:
    """The resolution of ``command`` (a name looked up on ``path_env``, or a path); None when
    there is no such file. Raises :class:`Unrunnable` for a shim that cannot be asked."""
    env = os.environ if env is None else env
    found = command if os.path.isabs(command) else shutil.which(command, path=path_env)
    if found is None or not os.path.isfile(found):
        return None
    via: str | None = None
    manager = shim_manager(os.path.realpath(found))
    if manager is not None:
        via = found
        try:
            found = _ask(manager[0], os.path.basename(found), manager[1], env)
        except Unrunnable as exc:
            raise Unrunnable(via, f"a version manager's shim: {exc.why}") from None
        if shim_manager(os.path.realpath(found)) is not None:
            raise Unrunnable(via, f"a version manager's shim whose target {found} is a shim again")
    hops = _hops(found)
    chain = list(hops)
    for word in _shebang(hops[-1], path_env):
        chain.extend(_hops(word) if os.path.isabs(word) else [word])
    exec_files = [p for p in dict.fromkeys(chain) if os.path.isfile(p)]
    return Resolved(run=found, exec_files=exec_files, read=_reads(hops), via=via)


def unrunnable_sentence(name: str, exc: Unrunnable, containment: str, *, where: str = "entrypoint") -> str:
    """The refusal: the resolved path, why, and the manifest change that fixes it."""
    example = shutil.which(os.path.basename(name), path="/usr/local/bin:/usr/bin:/bin")
    real = f"its real path (for example {example})" if example else "its real, absolute path"
    return (
        f"the {where}'s {name} resolves to {exc.path}, which {containment} containment cannot let run "
        f"({exc.why}); name the interpreter by {real} in the manifest's entrypoint and capabilities.shell.allow, "
        "or declare capabilities.containment: advisory"
    )

"""Applying a session's grants to each entrypoint start: the Landlock ruleset and, for ``sealed``,
the bubblewrap command line around the ``sealexec.py`` helper.

Why it looks like this is in :mod:`roost.capsule.confine` (docs/security.md, "Containment"),
which plans the :class:`~roost.capsule.confine.Grants` this module enforces.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from roost.capsule import landlock
from roost.capsule.binds import readonly_binds
from roost.capsule.confine import TOP_LEVEL_LINKS, Grants
from roost.capsule.probe import Decision, HostProbe
from roost.capsule.seccomp import Filter

__all__ = ["Confinement", "build_ruleset", "sandbox_argv"]

SEALEXEC = Path(__file__).with_name("sealexec.py")


def build_ruleset(g: Grants, abi: int) -> landlock.Ruleset:
    rs = landlock.Ruleset(abi, handle_net=g.tcp_ports is not None, scope=True)
    try:
        for p in g.read:
            _allow(rs, p, landlock.FS_READ)
        for p in g.read_exec:
            _allow(rs, p, landlock.FS_READ | landlock.FS_EXECUTE)
        for p in g.read_write:
            _allow(rs, p, landlock.FS_READ | landlock.FS_WRITE)
        for p in g.write_files:
            _allow(rs, p, landlock.FS_READ_FILE | landlock.FS_WRITE_FILE | landlock.FS_TRUNCATE)
        for p in g.exec_files:
            _allow(rs, p, landlock.FS_READ_FILE | landlock.FS_EXECUTE)
        for port in g.tcp_ports or ():
            rs.allow_port(port)
    except BaseException:
        rs.close()
        raise
    return rs


def _allow(rs: landlock.Ruleset, path: str, access: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        rs.allow_path(path, access)


def sandbox_argv(
    g: Grants, argv: list[str], *, workdir: Path, socket_path: Path, ruleset_fd: int, seccomp_fd: int | None = None
) -> list[str]:
    """``bwrap …`` around the sealexec helper around ``argv``."""
    bwrap = shutil.which("bwrap") or "bwrap"
    out = [
        bwrap,
        "--unshare-user",
        # uid 0 of the sandbox's user namespace (the job's uid outside): sealexec needs the mount
        # namespace's owner to mark the scope noexec; it then locks and drops every capability.
        "--uid",
        "0",
        "--gid",
        "0",
        "--cap-add",
        "CAP_SYS_ADMIN",
        "--cap-add",
        "CAP_SETPCAP",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]
    made: list[str] = []
    for link in TOP_LEVEL_LINKS:
        if os.path.islink(link):
            out += ["--symlink", os.readlink(link), link]
            made.append(link)
    # The writable scope first (sealexec marks this mount noexec), then what is read or executed
    # on top of it: the unpacked artifact under the workdir keeps a read-only, executable mount
    # of its own.
    for p in g.read_write:
        Path(p).mkdir(parents=True, exist_ok=True)
        out += ["--bind", p, p]
    out += readonly_binds((*g.read, *g.read_exec, *g.exec_files), made=made)  # links recreated, targets bound
    for p in g.read_only_binds:
        out += ["--ro-bind", p, p]
    out += ["--bind", str(socket_path), str(socket_path), "--chdir", str(workdir)]
    if seccomp_fd is not None:
        out += ["--add-seccomp-fd", str(seccomp_fd)]
    sealexec = [os.path.realpath(sys.executable), "-I", "-S", str(SEALEXEC), str(ruleset_fd), *g.read_write]
    out += ["--", *sealexec, "--", *argv]
    return out


@dataclass(slots=True)
class Confinement:
    """One session's class, decision and grants; :meth:`launch` prepares each entrypoint start."""

    probe: HostProbe
    decision: Decision
    grants: Grants | None
    seccomp: Filter | None = None

    def launch_parts(
        self, argv: list[str], *, workdir: Path, socket_path: Path, rlimits: Callable[[], None]
    ) -> tuple[list[str], Callable[[], None], tuple[int, ...], Callable[[], None]]:
        """``(argv, preexec, pass_fds, after_spawn)`` for one entrypoint start."""
        achieved = self.decision.achieved
        if achieved == "advisory" or self.grants is None:
            return argv, rlimits, (), _noop
        rs = build_ruleset(self.grants, self.probe.landlock_abi)
        fd = rs.fd
        seccomp = self.seccomp
        if achieved == "sealed":
            os.set_inheritable(fd, True)
            sfd = seccomp.pipe_fd() if seccomp is not None else None
            wrapped = sandbox_argv(
                self.grants, argv, workdir=workdir, socket_path=socket_path, ruleset_fd=fd, seccomp_fd=sfd
            )

            def done() -> None:
                rs.close()
                if sfd is not None:
                    os.close(sfd)

            return wrapped, rlimits, (fd,) if sfd is None else (fd, sfd), done

        def preexec() -> None:
            rlimits()
            landlock.restrict_self(fd)  # sets no_new_privs, which seccomp needs
            if seccomp is not None:
                seccomp.install()

        return argv, preexec, (), rs.close


def _noop() -> None:
    return None

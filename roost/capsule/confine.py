"""Holding an entrypoint to its declared containment class: the grants, the ruleset, the sandbox.

Why it looks like this (docs/security.md, "Containment"):

* ``scoped`` is Landlock, enforced on the entrypoint's whole process tree from its first
  instruction: the ruleset is built in the host (each granted path opened once) and the forked
  child only calls ``landlock_restrict_self`` before exec. Reads and writes stay inside
  ``filesystem.scope`` (the whole workdir when unset); what a program needs to run (system
  libraries, the interpreter, the unpacked artifact, a few ``/etc`` files) is read-only;
  execution is limited to the files ``shell.allow`` names, the entrypoint's interpreter chain and
  ``roost-capsule``; TCP connect to the daemon's port, the session's door and the ports
  ``network.allow`` names (Landlock filters ports, not hosts).
* ``sealed`` adds namespaces with bubblewrap: user, mount, pid, net, ipc and uts. The root is
  made of the read-only runtime paths plus the writable scope and the host socket; there is only
  a loopback, so the daemon, peers and files are reached solely through ``MURMUR_HOST_SOCKET``
  (where the daemon enforces ``network.allow`` and ``peer_fetch.allow``). Landlock applies
  inside too: Landlock forbids mounting, so it cannot be set on ``bwrap`` itself; a stdlib-only
  helper (``sealexec.py``) restricts itself inside the sandbox and execs the entrypoint.

What a class cannot express on this host is written into ``effective_grants.advisory`` as a
sentence, never dropped silently. This module plans the grants and reports them; applying them
to each entrypoint start (the ruleset, the bubblewrap command line) is :mod:`roost.capsule.sandbox`.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from roost.capsule.interpreters import Unrunnable
from roost.capsule.interpreters import resolve as resolve_command
from roost.capsule.probe import Decision, HostProbe
from roost.core.manifest import Manifest
from roost.core.netrule import NetworkAllowRule

__all__ = ["Grants", "effective_grants", "plan_grants"]

SYSTEM_READ = (
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libx32",
    "/usr/local/lib",
    "/usr/share",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
)
"""Library and data directories, never the program directories (``/usr/bin``, ``/bin``, ``/sbin``…):
read access to a program lets the dynamic loader run it (``ld.so /usr/bin/id``), so the programs an
entrypoint may run are the files of ``exec_files`` alone."""
TOP_LEVEL_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Merged-/usr links a sandbox keeps as links (``#!/bin/sh`` must resolve), with nothing behind them
but what is granted."""
ETC_READ = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/alternatives",
    "/etc/mime.types",
)
DEV_RW = ("/dev/null", "/dev/zero", "/dev/full")
DEV_READ = ("/dev/urandom", "/dev/random")


@dataclass(slots=True)
class Grants:
    """What the entrypoint may touch: paths by right, TCP ports, and what stays advisory."""

    read: list[str] = field(default_factory=list)
    read_exec: list[str] = field(default_factory=list)
    read_write: list[str] = field(default_factory=list)
    write_files: list[str] = field(default_factory=list)
    exec_files: list[str] = field(default_factory=list)
    tcp_ports: list[int] | None = field(default_factory=list)  # None: TCP left unrestricted
    advisory: list[str] = field(default_factory=list)
    missing_shell: list[str] = field(default_factory=list)
    read_only_binds: list[str] = field(default_factory=list)  # sealed: bound read-only over the scope


def _loaders() -> list[str]:
    """The dynamic loaders, which the kernel runs for every dynamically linked program."""
    return sorted(os.path.realpath(p) for p in glob.glob("/lib*/ld-linux*.so*") + glob.glob("/lib*/ld-musl*.so*"))


def runtime_roots() -> list[str]:
    """Directories (and files) the interpreter and our own package are read from (read-only): the
    standard library and site-packages, the prefixes' ``lib`` (``libpython``), a virtual
    environment's ``pyvenv.cfg`` — not the prefixes themselves, whose ``bin`` holds programs."""
    import sysconfig

    import a2a
    import roost

    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        roots.add(os.path.join(prefix, "lib"))
        roots.add(os.path.join(prefix, "lib64"))
        cfg = os.path.join(prefix, "pyvenv.cfg")
        if os.path.isfile(cfg):
            roots.add(cfg)
    roots.add(str(Path(roost.__file__).resolve().parent))
    roots.add(str(Path(a2a.__file__).resolve().parent))
    for entry in sys.path:
        if entry and os.path.isdir(entry) and "site-packages" in entry:
            roots.add(os.path.realpath(entry))
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):  # read by every interpreter
        if entry and os.path.isdir(entry):
            roots.add(os.path.realpath(entry))
    return sorted(r for r in roots if os.path.exists(r))


def _ports(manifest: Manifest, fixed: Sequence[int]) -> tuple[list[int] | None, list[str]]:
    ports = set(fixed)
    notes: list[str] = []
    hosts = set()
    for entry in manifest.capabilities.network.allow:
        rule = NetworkAllowRule.parse(entry)
        if rule is None:
            continue
        hosts.add(rule.host)
        if rule.port is None:
            notes.append(
                f"network.allow entry '{entry}' names no port and Landlock filters TCP by port only, "
                "so TCP connect and bind are not restricted"
            )
            return None, notes
        ports.add(rule.port)
    if hosts:
        notes.append(
            "network.allow hosts (" + ", ".join(sorted(hosts)) + ") are advisory: Landlock filters TCP by "
            "port, so any host is reachable on an allowed port"
        )
    return sorted(ports), notes


def plan_grants(
    manifest: Manifest,
    *,
    achieved: str,
    abi: int,
    workdir: Path,
    artifact: Path,
    records: Path,
    argv0: str,
    path_env: str,
    daemon_port: int | None,
    door_port: int | None,
) -> Grants:
    """The grants for ``scoped`` (and, inside the sandbox, ``sealed``) on this host."""
    caps = manifest.capabilities
    g = Grants()
    g.read = [p for p in (*SYSTEM_READ, *ETC_READ, *DEV_READ) if os.path.exists(p)]
    g.read += [r for r in runtime_roots() if r not in g.read]
    g.read_exec = [str(artifact)]
    g.write_files = [p for p in DEV_RW if os.path.exists(p)]
    if achieved == "scoped":
        g.read.append("/proc")
    scope = caps.filesystem.scope
    target = (workdir / scope) if scope else workdir
    target.mkdir(parents=True, exist_ok=True)  # a rule needs the directory to exist
    g.read_write = [str(target)]
    if scope is None:
        g.advisory.append(
            "filesystem.scope is unset, so the whole workdir is writable, including the runtime's records under .murmur"
        )
    for ro in _read_only(manifest):
        path = workdir / ro
        if scope is not None and not _inside(ro, scope):
            if path.exists():
                g.read.append(str(path))
        elif achieved == "sealed":
            if path.exists():
                g.read_only_binds.append(str(path))
        else:
            g.advisory.append(
                f"filesystem.read_only '{ro}' lies inside the writable scope and Landlock cannot narrow a grant, "
                "so it is not write-protected"
            )
    entry = resolve_command(argv0, path_env)  # the interpreter chain, symlinks and shims resolved
    exec_files = (entry.exec_files if entry is not None else []) + _loaders()
    g.read += [r for r in (entry.read if entry is not None else []) if r not in g.read]
    own = shutil.which("roost-capsule", path=path_env)
    if own:
        exec_files.append(os.path.realpath(own))
        exec_files.append(os.path.abspath(own))
    exec_files.append(os.path.realpath(sys.executable))
    for name in caps.shell.allow:
        try:
            found = resolve_command(name, path_env)
        except Unrunnable as exc:
            g.advisory.append(f"shell.allow '{name}' resolves to {exc.path}, which cannot run here ({exc.why})")
            continue
        if found is None:
            g.missing_shell.append(name)
            continue
        exec_files += found.exec_files
        g.read += [r for r in found.read if r not in g.read]
        if found.via is not None:
            g.advisory.append(f"shell.allow '{name}' is a shim ({found.via}); only its target {found.run} may run")
    g.exec_files = sorted({f for f in exec_files if os.path.isfile(f)})
    if g.missing_shell:
        g.advisory.append("shell.allow names not found on PATH (nothing to allow): " + ", ".join(g.missing_shell))
    if achieved == "sealed":
        g.tcp_ports = []  # only a loopback exists; everything goes through the host socket
    else:
        fixed = [p for p in (daemon_port, door_port) if p]
        g.tcp_ports, notes = _ports(manifest, fixed)
        g.advisory += notes
    if abi < 4 and g.tcp_ports is not None and achieved == "scoped":
        g.advisory.append(
            f"Landlock ABI {abi} has no network rules (ABI 4), so TCP connect and bind are not restricted"
        )
        g.tcp_ports = None
    if achieved == "scoped":
        g.advisory.append(
            "UDP and connecting to pathname unix sockets are not restricted by Landlock; other processes stay "
            "visible in /proc (sealed hides them)"
        )
    if abi < 6:
        g.advisory.append(f"Landlock ABI {abi} cannot scope signals or abstract unix sockets (ABI 6)")
    return g


def _read_only(manifest: Manifest) -> list[str]:
    return list(manifest.capabilities.filesystem.read_only)


def _inside(path: str, scope: str) -> bool:
    a = [p for p in Path(path).parts if p not in ("", ".")]
    b = [p for p in Path(scope).parts if p not in ("", ".")]
    return a[: len(b)] == b


def effective_grants(manifest: Manifest, probe: HostProbe, d: Decision, g: Grants | None) -> dict[str, object]:
    """The seeds' ``effective_grants`` (the fields this host can fill truthfully), plus what the
    rules actually are and what stays advisory."""
    caps = manifest.capabilities
    enforced = d.achieved != "advisory" and g is not None
    out: dict[str, object] = {
        "declared_containment": d.declared,
        "achieved_containment": d.enforceable,
        "floor_met": d.floor_met,
    }
    if not d.floor_met:
        out["shortfall_reason"] = d.shortfall_reason
    out |= {
        "enforcement_tier": probe.offered,
        "userns_grant": probe.userns_grant,
        "landlock_abi": probe.landlock_abi,
        "filesystem_scope": caps.filesystem.scope,
        "workdir_exec": caps.filesystem.workdir_exec,
        "read_only_paths": _read_only(manifest),
        "read_only_advisory_for": list(caps.shell.allow) if _read_only(manifest) and enforced else [],
        "network_allow": list(caps.network.allow),
        "unix_sockets": caps.network.unix_sockets,
        "shell_allow": list(caps.shell.allow),
        "spawn_allow": list(caps.spawn.allow),
        "env_allow": list(caps.env.allow),
        "peer_fetch_allow": list(caps.peer_fetch.allow),
        "filesystem_boundary": {
            "restriction": "enforced" if enforced else "advisory",
            "mechanism": {"scoped": "landlock", "sealed": "bubblewrap+landlock"}.get(d.achieved, "none"),
            "not_protected": [] if not enforced else list(g.advisory if g else []),
        },
    }
    if g is not None and enforced:
        out["tcp_connect_ports"] = g.tcp_ports
        out["exec_allowed"] = g.exec_files
        out["advisory"] = g.advisory
    else:
        out["advisory"] = ["containment is advisory: the entrypoint runs with every right of its uid"]
    return out


def _env_path(env: Mapping[str, str]) -> str:
    return env.get("PATH", os.defpath)

"""Check the installation and say how to fix what is wrong.

Checks: the daemon answers on its admin socket; the socket is owner-only (0600, owned by this
user, in a directory others cannot write); the state dir is 0700 and ``master.key`` is a
0600 regular file of 32 bytes; the registry is readable and lists artifacts; the capsule host
(``roost-capsule``) and the external runtime (``mur``) are found; the strongest containment class
capsule hosts on this machine can enforce, and what would raise it; what enforces each resource
limit, and which are refused or (``resource_limits = "advisory"``) not enforced; with ``launcher = "ray"``, the
cluster and each node's keeper (``GET /cluster``). Works without a daemon (then
it checks the defaults or ``--state-dir``). ``--json`` prints ``{"ok", "findings": [{check,
status: ok|note|warn|fail, detail, fix}]}`` (``note``: something was not checked, and why); exit 1
when any check failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from roost.core.admin_models import ClusterReport, ConfigView, StatusAnswer
from roost.ctl.context import Context
from roost.ctl.errors import CtlError
from roost.ctl.netcheck import check_network

NAME = "doctor"
HELP = "check the installation, with a fix for each finding"
DESCRIPTION = (
    "Check the daemon, its admin socket, state dir, master key, registry and capsule host, and\n"
    "say how to fix each problem found. Works without a running daemon too."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--registry-path", metavar="DIR", help="registry to check (default: the daemon's)")
    p.add_argument(
        "--ca", metavar="FILE", help="CA (PEM) to verify the network listener's TLS certificate with (MURMUR_ROOST_CA)"
    )


class _Findings:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, check: str, status: str, detail: str, fix: str = "") -> None:
        self.items.append({"check": check, "status": status, "detail": detail, "fix": fix})


def _mode(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except OSError:
        return None


def _check_socket(f: _Findings, path: Path) -> None:
    st = _mode(path)
    if st is None:
        return
    mode = stat.S_IMODE(st.st_mode)
    if not stat.S_ISSOCK(st.st_mode):
        f.add("admin-socket", "fail", f"{path} is not a socket", f"remove {path} and restart mur-roost")
    elif mode & 0o077 or st.st_uid != os.geteuid():
        f.add(
            "admin-socket",
            "fail",
            f"{path} has mode {mode:04o}, owner uid {st.st_uid}",
            f"chmod 600 {path} (the daemon creates it 0600; restart it to recreate)",
        )
    else:
        f.add("admin-socket", "ok", f"{path} is 0600 and yours")
    pst = _mode(path.parent)
    if pst is not None and stat.S_IMODE(pst.st_mode) & 0o022:
        f.add(
            "admin-socket-dir",
            "fail",
            f"{path.parent} is writable by group or others ({stat.S_IMODE(pst.st_mode):04o})",
            f"chmod 700 {path.parent}",
        )


def _check_state(f: _Findings, state_dir: Path, ephemeral: bool) -> None:
    st = _mode(state_dir)
    if st is None:
        f.add("state-dir", "warn", f"{state_dir} does not exist", "start mur-roost once; it creates it 0700")
        return
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        f.add("state-dir", "fail", f"{state_dir} has mode {mode:04o}", f"chmod 700 {state_dir}")
    elif st.st_uid != os.geteuid():
        f.add(
            "state-dir",
            "warn",
            f"{state_dir} belongs to uid {st.st_uid}, not you",
            "run roostctl as the daemon's user (sudo -u mur-roost roostctl doctor)",
        )
    else:
        f.add("state-dir", "ok", f"{state_dir} is 0700 and yours")
    key = state_dir / "master.key"
    kst = _mode(key)
    if kst is None:
        if ephemeral:
            f.add("key-file", "ok", "ephemeral keys: no key file (a restart revokes every token)")
        else:
            f.add("key-file", "warn", f"{key} does not exist", "start mur-roost; it creates the key 0600")
    elif not stat.S_ISREG(kst.st_mode):
        f.add("key-file", "fail", f"{key} is not a regular file", f"remove {key} (revokes every token) and restart")
    elif stat.S_IMODE(kst.st_mode) & 0o077:
        f.add("key-file", "fail", f"{key} has mode {stat.S_IMODE(kst.st_mode):04o}", f"chmod 600 {key}")
    elif kst.st_size != 32:
        f.add("key-file", "fail", f"{key} holds {kst.st_size} bytes, not 32", f"remove {key} and restart")
    else:
        f.add("key-file", "ok", f"{key} is 0600, 32 bytes")


def _check_registry(f: _Findings, root: Path | None) -> None:
    if root is None:
        f.add("registry", "warn", "no registry path known", "pass --registry-path or start the daemon")
        return
    if not root.is_dir() or not os.access(root, os.R_OK | os.X_OK):
        f.add(
            "registry",
            "fail",
            f"{root} is not a readable directory",
            "set registry_path in roost.toml to a directory of <name>/<version>/<name>-<version>.mur.zip",
        )
        return
    from roost.state.registry.catalog import Catalog

    n = len(Catalog(root).list())
    if n == 0:
        f.add("registry", "warn", f"{root} holds no artifacts", "roostctl registry add DIR")
    else:
        f.add("registry", "ok", f"{root}: {n} artifacts (roostctl registry verify re-checks each)")


def _check_runtimes(f: _Findings, config: ConfigView | None) -> None:
    capsule_cmd = (config or {}).get("capsule_command") or []
    if capsule_cmd:
        exe = capsule_cmd[0]
        ok = shutil.which(exe) is not None
        f.add("roost-capsule", "ok" if ok else "fail", f"capsule_command {exe}", "" if ok else f"install {exe}")
    elif importlib.util.find_spec("roost.capsule") is None:
        f.add("roost-capsule", "fail", "the roost.capsule module is missing", "pip install mur-roost")
    else:
        on_path = shutil.which("roost-capsule")
        f.add(
            "roost-capsule",
            "ok" if on_path else "warn",
            f"runs as python -m roost.capsule; roost-capsule on PATH: {on_path or 'no'}",
            "" if on_path else "put the venv's bin/ on PATH so capsules can call roost-capsule",
        )
    runtime = (config or {}).get("runtime_command") or ["mur", "run"]
    found = shutil.which(runtime[0])
    f.add(
        "mur-runtime",
        "ok" if found else "warn",
        f"{runtime[0]}: {found or 'not found'} (needed only for capsules without an entrypoint)",
        "" if found else "install the Murmur runtime, or set runtime_command in roost.toml",
    )


def _check_containment(f: _Findings, config: ConfigView | None) -> None:
    from roost.capsule.probe import CONTAINMENT_MAX_ENV, probe_host

    cap = (config or {}).get("containment_max") or ""
    probe = probe_host({CONTAINMENT_MAX_ENV: str(cap)})
    facts = (
        f"Landlock ABI {probe.landlock_abi or 'absent'}"
        + (f" ({probe.landlock_reason})" if probe.landlock_reason else "")
        + f"; user namespaces: {'yes' if probe.userns else 'no'} (userns_grant {probe.userns_grant})"
        + f"; bwrap: {probe.bwrap or 'not found'}"
    )
    hints = probe.raise_hints()
    detail = f"capsule hosts here enforce up to '{probe.offered}': {facts}"
    f.add("containment", "ok" if not hints else "warn", detail, "; ".join(hints))


def operator_jobs_finding(daemon_uid: int | None, run_as: str | None) -> tuple[str, str, str, str]:
    """``(check, status, detail, fix)`` for the uid the operator's jobs run as (pure)."""
    if run_as:
        return ("operator-jobs", "ok", f"the operator's jobs run as {run_as} (run_as)", "")
    if daemon_uid == 0:
        return (
            "operator-jobs",
            "warn",
            "the operator's jobs run as uid 0 (without capabilities, but as root for every file)",
            'set run_as = "mur-roost-jobs" in roost.toml (systemd-sysusers creates the user from '
            "systemd/mur-roost.sysusers.conf)",
        )
    who = "an unknown uid" if daemon_uid is None else f"uid {daemon_uid}, the daemon's own"
    return ("operator-jobs", "ok", f"the operator's jobs run as {who}", "")


def _daemon_uid(status: StatusAnswer | None) -> int | None:
    """The daemon's uid, from its pid (this host's /proc)."""
    pid = status["pid"] if status is not None else None
    if not isinstance(pid, int):
        return None
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def limits_findings(status: StatusAnswer | None, launcher: str | None = None) -> list[tuple[str, str, str, str]]:
    """What enforces each ``capabilities.resources`` limit here, and what does not (pure; from
    ``GET /status``'s ``resource_limits``; docs/security.md, "Resource limits")."""
    report = status.get("resource_limits") if status is not None else None
    mechanisms = report["mechanisms"] if report is not None else None
    if report is not None and mechanisms is None and launcher == "ray":
        detail = "children run on Ray nodes: each node's keeper enforces their limits there (its resource-limits)"
        return [("resource-limits", "note", detail, "")]
    if report is None or mechanisms is None:
        return [("resource-limits", "note", "the daemon does not say how it enforces resource limits", "")]
    return [mechanisms_finding("resource-limits", mechanisms, report["mode"] or "enforce", "here", "the daemon")]


def mechanisms_finding(
    check: str, mechanisms: dict[str, str | None], mode: str, where: str, holder: str
) -> tuple[str, str, str, str]:
    """``(check, status, detail, fix)`` for what enforces each limit ``where`` (pure)."""
    missing = sorted(field for field, how in mechanisms.items() if not how)
    held = ", ".join(f"{field} by {how}" for field, how in mechanisms.items() if how)
    if not missing:
        return (check, "ok", f"every limit is enforced {where}: {held}", "")
    fix = (
        f"give {holder} a delegated cgroup with the missing controllers (systemd: Delegate=yes; on a "
        "hybrid host, writable cgroup v1 hierarchies for them)"
    )
    if mode == "advisory":
        detail = (
            f'not enforced {where}: {", ".join(missing)} (resource_limits = "advisory": jobs declaring them run '
            f"without them, listed in effective_grants.resource_limits); enforced: {held or 'nothing'}"
        )
    else:
        detail = (
            f"a launch declaring {', '.join(missing)} is refused {where} (no mechanism enforces it); "
            f"enforced: {held or 'nothing'}"
        )
        fix += ', or set resource_limits = "advisory" to run such jobs with the limit not enforced'
    return (check, "warn", detail, fix)


def _check_cluster(f: _Findings, ctx: Context, config: ConfigView | None, limits_mode: str) -> None:
    """With ``launcher = "ray"``: the cluster answers, has nodes and free resources, and on each
    node with a keeper, the keeper is alive, the capsule command runs there (with ``--version``),
    the runtime is found, and the artifact cache is writable and intact (docs/operations.md)."""
    if (config or {}).get("launcher") != "ray":
        return
    try:
        report: ClusterReport = ctx.client.call("GET", "/cluster")
    except CtlError as exc:
        f.add("ray-cluster", "fail", exc.message, "upgrade the daemon: it has no cluster report")
        return
    for item in cluster_findings(report, limits_mode):
        f.add(*item)


def cluster_findings(report: ClusterReport, limits_mode: str = "enforce") -> list[tuple[str, str, str, str]]:
    """Findings ``(check, status, detail, fix)`` from a ``GET /cluster`` report (pure);
    ``limits_mode`` is the daemon's ``resource_limits``."""
    out: list[tuple[str, str, str, str]] = []
    where = str(report.get("address") or "embedded")
    if not report.get("connected"):
        out.append(
            (
                "ray-cluster",
                "fail",
                f"the Ray cluster ({where}) is not reachable: {report.get('error') or 'no answer'}",
                _unreachable_fix(where),
            )
        )
        return out
    if report.get("error"):
        out.append(
            (
                "ray-cluster",
                "fail",
                f"the Ray cluster ({where}) did not answer the daemon's query: {report.get('error')}",
                f"check that the head (GCS) at {where} is up; a daemon whose head stays away longer than "
                "gcs_rpc_server_reconnect_timeout_s exits, and reconciles once restarted",
            )
        )
        return out
    nodes = report.get("nodes") or []
    free = report.get("available") or {}
    cpus = float(free.get("CPU", 0.0))
    out.append(
        (
            "ray-cluster",
            "ok" if nodes and cpus > 0 else "warn",
            f"{where}: {len(nodes)} live node(s), {cpus:g} CPU free",
            "" if nodes and cpus > 0 else "add nodes (ray start --address ...) or wait for running children to end",
        )
    )
    for node in nodes:
        out.extend(node_findings(node, str(report.get("version") or ""), limits_mode))
    return out


def node_findings(
    node: dict[str, Any], daemon_version: str, limits_mode: str = "enforce"
) -> list[tuple[str, str, str, str]]:
    """One node's findings: its keeper, the capsule command and the runtime as a child there
    would be started, its artifact cache, and what enforces each resource limit there (pure;
    the keeper checked them on the node)."""
    name = f"ray-node {str(node.get('node_id', '?'))[:12]}"
    addr = node.get("address") or "?"
    keeper = node.get("keeper")
    if keeper is None:
        detail = f"{addr}: no keeper yet, so nothing was checked there (the first child placed there starts one)"
        return [(name, "note", detail, "")]
    if "error" in keeper:
        return [(name, "fail", f"{addr}: the node keeper does not answer: {keeper['error']}", "restart the node's Ray")]
    out = [
        (
            name,
            "ok",
            f"{addr}: keeper alive (pid {keeper.get('pid')}), {keeper.get('children', 0)} children, "
            f"root {keeper.get('root')}",
            "",
        )
    ]
    commands = keeper.get("commands") or {}
    capsule = commands.get("capsule")
    if capsule is not None:
        out.append(_capsule_finding(name, addr, capsule, daemon_version))
    runtime = commands.get("runtime")
    if runtime is not None:
        out.append(_runtime_finding(name, addr, runtime))
    cache = keeper.get("cache")
    if cache is not None:
        out.append(_cache_finding(name, addr, cache))
    limits = keeper.get("resource_limits")
    if limits is not None:
        holder = "the node's Ray (its keeper runs under the raylet)"
        out.append(mechanisms_finding(f"{name} resource-limits", limits, limits_mode, f"on {addr}", holder))
    return out


def _capsule_finding(name: str, addr: str, check: dict[str, Any], daemon_version: str) -> tuple[str, str, str, str]:
    argv = " ".join(check.get("argv") or [])
    package = f"mur-roost {daemon_version}" if daemon_version else "mur-roost"
    if check.get("error"):
        return (
            f"{name} roost-capsule",
            "fail",
            f"{addr}: the capsule command ({argv}) does not run there: {check['error']}",
            f"install {package} on that node (pip install {package.replace(' ', '==')}) so that "
            f"'{argv} --version' runs there, or set capsule_command in roost.toml to a command every node has",
        )
    version = str(check.get("version") or "")
    detail = f"{addr}: {argv} runs there ({check.get('found')}): {version}"
    if daemon_version and not version.endswith(f" {daemon_version}"):
        return (
            f"{name} roost-capsule",
            "warn",
            detail + f"; the daemon is mur-roost {daemon_version}",
            f"install mur-roost {daemon_version} on that node, the same version as the daemon's",
        )
    return (f"{name} roost-capsule", "ok", detail, "")


def _runtime_finding(name: str, addr: str, check: dict[str, Any]) -> tuple[str, str, str, str]:
    argv = " ".join(check.get("argv") or [])
    if check.get("error"):
        return (
            f"{name} mur-runtime",
            "warn",
            f"{addr}: the runtime command ({argv}) is missing there: {check['error']} "
            "(needed only for capsules without an entrypoint)",
            "install the Murmur runtime on that node, or set runtime_command in roost.toml",
        )
    return (f"{name} mur-runtime", "ok", f"{addr}: {argv} found there ({check.get('found')})", "")


def _cache_finding(name: str, addr: str, cache: dict[str, Any]) -> tuple[str, str, str, str]:
    where = cache.get("dir")
    size = f"{int(cache.get('count', 0))} cached artifact(s), {int(cache.get('bytes', 0)) / 2**20:.1f} MiB in {where}"
    if not cache.get("writable"):
        return (
            f"{name} artifact-cache",
            "fail",
            f"{addr}: {size}, and the keeper cannot write there",
            f"make {where} writable by the user the node's Ray runs as, or set MURMUR_ROOST_NODE_ROOT on that node",
        )
    bad = list(cache.get("mismatched") or [])
    if bad:
        return (
            f"{name} artifact-cache",
            "warn",
            f"{addr}: {size}; {len(bad)} no longer match their recorded sha256: {', '.join(bad[:5])}",
            f"remove them from {where}: the keeper fetches a verified copy at the next launch that needs one",
        )
    return (f"{name} artifact-cache", "ok", f"{addr}: {size}", "")


def _unreachable_fix(where: str) -> str:
    """What to do about a cluster the daemon cannot reach, by how roost.toml names it."""
    retry = "; the daemon keeps retrying and refuses launches until it answers"
    if where == "embedded":
        return (
            "the daemon's own Ray (ray_address unset) did not start: read the daemon's log (ray_unreachable) "
            "for why, or set ray_address to join a running cluster" + retry
        )
    if where == "auto":
        return "start Ray on the daemon's host (ray start --head), or set ray_address to the head's host:port" + retry
    host, _, port = where.removeprefix("ray://").rpartition(":")
    if host and port.isdigit():
        return (
            f"start the head there (on {host}: ray start --head --port {port}) and check that the daemon's host "
            f"reaches {host}:{port}, or fix ray_address in roost.toml" + retry
        )
    return f"fix ray_address in roost.toml ({where!r} is not host:port)" + retry


def run(ctx: Context, args: argparse.Namespace) -> int:
    f = _Findings()
    path, source = ctx.socket_path
    status: StatusAnswer | None = None
    config: ConfigView | None = None
    try:
        status = ctx.client.call("GET", "/status")
        config = ctx.client.call("GET", "/config")
        f.add("daemon", "ok", f"mur-roost {status['version']} answers at {path} ({source})")
    except CtlError as exc:
        f.add("daemon", "fail", exc.message, "start it: mur-roost --config roost.toml (or systemctl start mur-roost)")
    _check_socket(f, path)
    state_dir = Path(status["state_dir"]) if status else (Path(ctx.state_dir) if ctx.state_dir else path.parent)
    _check_state(f, state_dir, bool(status and status["ephemeral_keys"]))
    reg = args.registry_path or (config or {}).get("registry_path") or os.environ.get("ROOST_REGISTRY_PATH")
    _check_registry(f, Path(reg) if reg else None)
    _check_runtimes(f, config)
    _check_containment(f, config)
    if status is not None:
        f.add(*operator_jobs_finding(_daemon_uid(status), (config or {}).get("run_as")))
        for finding in limits_findings(status, (config or {}).get("launcher")):
            f.add(*finding)
    mode = status["resource_limits"]["mode"] if status is not None and status.get("resource_limits") else "enforce"
    _check_cluster(f, ctx, config, mode)
    check_network(f.add, status, args.ca, timeout=ctx.timeout)
    ok = all(i["status"] != "fail" for i in f.items)
    out = ctx.out
    if out.as_json:
        out.json({"ok": ok, "findings": f.items})
    else:
        marks = {"ok": ("ok", "green"), "note": ("note", "cyan"), "warn": ("warn", "yellow"), "fail": ("FAIL", "red")}
        for item in f.items:
            text, color = marks[item["status"]]
            out.line(f"{out.paint(text.ljust(4), color)}  {item['check']}: {item['detail']}")
            if item["fix"]:
                out.line(f"      fix: {item['fix']}")
    return 0 if ok else 1

"""The systemd side: sd_notify against sockets the test binds, the unit under systemd-analyze,
and a real ``mur-roost`` driving READY/STATUS/WATCHDOG/RELOADING/STOPPING through a fake
``NOTIFY_SOCKET`` (PID 1 here is not systemd, so this is the end-to-end test that can run)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ops.support import EXAMPLES, REPO, daemon_env, roostctl

from roost.daemon import startup
from roost.system import sdnotify

UNIT = REPO / "systemd" / "mur-roost.service"


def _refusal_codes() -> set[int]:
    """Every start-up refusal's exit code, from the code itself (all but EXIT_OTHER)."""
    return {v for k, v in vars(startup).items() if k.startswith("EXIT_") and k != "EXIT_OTHER"}


def test_the_unit_never_restarts_into_a_refusal() -> None:
    """Each refusal a restart cannot fix stops systemd's restarts, and the docs list the same."""
    found = re.findall(r"^RestartPreventExitStatus=(.*)$", UNIT.read_text(), re.MULTILINE)
    assert len(found) == 1
    assert {int(code) for code in found[0].split()} == _refusal_codes()
    assert startup.EXIT_OTHER not in {int(code) for code in found[0].split()}
    docs = (REPO / "docs" / "operations.md").read_text()
    section = docs[docs.index("## Start-up refusals") :]
    section = section[: section.index("\n## ", 1)]
    table = {int(m) for m in re.findall(r"^\| (\d+) \|", section, re.MULTILINE)}
    assert table == _refusal_codes() | {startup.EXIT_OTHER}
    assert f"`RestartPreventExitStatus={found[0]}`" in section


def _receiver(tmp_path: Path) -> tuple[socket.socket, str]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(10)
    return sock, path


def test_notify_sends_one_datagram(tmp_path: Path) -> None:
    sock, path = _receiver(tmp_path)
    with sock:
        assert sdnotify.notify("READY=1", "STATUS=hello", env={"NOTIFY_SOCKET": path})
        assert sock.recv(4096) == b"READY=1\nSTATUS=hello"


def test_notify_abstract_namespace() -> None:
    name = f"roost-test-{os.getpid()}-{time.monotonic_ns()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        assert sdnotify.notify("WATCHDOG=1", env={"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(100) == b"WATCHDOG=1"


def test_notify_without_socket_is_a_noop(tmp_path: Path) -> None:
    assert sdnotify.notify("READY=1", env={}) is False
    assert sdnotify.notify("READY=1", env={"NOTIFY_SOCKET": str(tmp_path / "absent")}) is False


def test_watchdog_interval() -> None:
    assert sdnotify.watchdog_interval({"WATCHDOG_USEC": "30000000"}) == 15.0
    assert sdnotify.watchdog_interval({}) is None
    assert sdnotify.watchdog_interval({"WATCHDOG_USEC": "x"}) is None
    assert sdnotify.watchdog_interval({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}) is None
    assert sdnotify.watchdog_interval({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": str(os.getpid())}) == 0.5


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    text = UNIT.read_text()
    # verify wants ExecStart's binary to exist: point it at this venv's mur-roost.
    exe = Path(sys.executable).parent / "mur-roost"
    unit = tmp_path / "mur-roost.service"
    unit.write_text(text.replace("/usr/local/bin/mur-roost", str(exe)))
    out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    problems = [ln for ln in out.stderr.splitlines() if "mur-roost.service" in ln]
    assert out.returncode == 0 and not problems, out.stderr
    for key in (
        "Type=notify",
        "NotifyAccess=main",
        "WatchdogSec=",
        "StateDirectory=",
        "RuntimeDirectory=",
        "ExecReload=/bin/kill -HUP $MAINPID",
        # Children survive a crash of the daemon, for re-adoption (docs/operations.md).
        "KillMode=process",
        "Delegate=yes",
        "ProtectControlGroups=no",
        # CAP_SETPCAP: children exec through setpriv, which clears their bounding set.
        "CapabilityBoundingSet=CAP_SETUID CAP_SETGID CAP_SETPCAP CAP_CHOWN CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH "
        "CAP_KILL",
        "NoNewPrivileges=yes",
        "ProtectSystem=full",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
    ):
        assert key in text
    for absent in ("\nMemoryDenyWriteExecute=", "\nPrivateTmp=", "\nProtectHome=", "\nUser=", "\nKillMode=mixed"):
        assert absent not in text  # W+X for Python children; callers' workdirs visible; uid switching


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_unit_exposure_under_systemd_analyze_security(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "mur-roost"
    unit = tmp_path / "mur-roost.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/mur-roost", str(exe)))
    out = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    found = re.search(r"Overall exposure level for mur-roost\.service: ([0-9.]+)", out.stdout + out.stderr)
    assert found, out.stdout + out.stderr
    exposure = float(found.group(1))
    print(f"systemd-analyze security: overall exposure {exposure}")
    # Root with six capabilities, a delegated cgroup subtree and callers' workdirs visible.
    assert exposure <= 5.5, out.stdout


def _recv_until(sock: socket.socket, want: str, seen: list[str], timeout: float = 15) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            msg = sock.recv(4096).decode()
        except TimeoutError:
            break
        seen.append(msg)
        if want in msg.split("\n"):
            return msg
    raise AssertionError(f"no {want} in {seen}")


def test_daemon_speaks_the_notify_protocol(tmp_path: Path) -> None:
    sock, path = _receiver(tmp_path)
    cfg = tmp_path / "roost.toml"
    cfg.write_text(f'registry_path = "{EXAMPLES}"\nspawn_allow = ["echo"]\nstate_dir = "state"\n')
    env = daemon_env(NOTIFY_SOCKET=path, WATCHDOG_USEC="200000")
    proc = subprocess.Popen(
        [sys.executable, "-m", "roost", "--config", str(cfg), "--port", "0", "--log-format", "json"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seen: list[str] = []
    try:
        with sock:
            ready = _recv_until(sock, "READY=1", seen)
            assert any(line.startswith("STATUS=") and "capsules running" in line for line in ready.split("\n"))
            assert f"MAINPID={proc.pid}" in ready.split("\n")
            # READY=1 is sent once both listeners are bound: the admin socket answers now.
            assert roostctl("status", "--json", state_dir=tmp_path / "state").code == 0
            _recv_until(sock, "WATCHDOG=1", seen)
            _recv_until(sock, "WATCHDOG=1", seen)  # periodic, every WATCHDOG_USEC/2
            proc.send_signal(signal.SIGHUP)
            reloading = _recv_until(sock, "RELOADING=1", seen)
            assert any(line.startswith("MONOTONIC_USEC=") for line in reloading.split("\n"))
            _recv_until(sock, "READY=1", seen)
            proc.send_signal(signal.SIGTERM)
            _recv_until(sock, "STOPPING=1", seen)
            assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

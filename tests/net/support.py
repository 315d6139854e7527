"""Helpers for the network tests: a test CA made at run time, daemons, and a network namespace.

Nothing here is committed key material: :func:`make_pki` creates a CA and a server certificate
with ``cryptography`` in the test's own directory. :class:`NetNs` gives a test a real
non-loopback address without touching the host's network: a holder process in a new network
namespace (``unshare -n``) puts ``10.77.0.1`` and ``10.77.0.2`` on that namespace's ``lo``; the
daemon runs inside it (``nsenter``) and the test's client runs on a thread that joined it
(``setns``), so a connection from 10.77.0.2 to 10.77.0.1 is, for the daemon, a caller from
another host — the kernel path is exactly that of a remote peer's accepted connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import datetime
import ipaddress
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from roost.daemon.compose import Roost
from roost.services.artifactserve import keeper_token
from roost.state.config import Config
from roost.state.keys import KeyRing
from roost.state.registry.packing import pack_capsule
from tests.support.daemon import InProcessDaemon

T = TypeVar("T")

SERVER_IP = "10.77.0.1"
CLIENT_IP = "10.77.0.2"
_CLONE_NEWNET = 0x40000000


# -- a test CA -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca: Path
    cert: Path
    key: Path
    other_ca: Path
    """A second CA that signed nothing here: trusting it alone must not verify the daemon."""


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def make_pki(directory: Path, ips: tuple[str, ...] = ("127.0.0.1",)) -> Pki:
    """A CA, a server certificate for ``ips`` (and ``localhost``) signed by it, and an unrelated CA."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _ca("roost test CA")
    _, other = _ca("some other CA")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = [x509.DNSName("localhost")]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("mur-roost test daemon"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    pki = Pki(
        ca=directory / "ca.pem",
        cert=directory / "server.pem",
        key=directory / "server.key",
        other_ca=directory / "other-ca.pem",
    )
    pki.ca.write_bytes(ca_cert.public_bytes(pem))
    pki.other_ca.write_bytes(other.public_bytes(pem))
    pki.cert.write_bytes(cert.public_bytes(pem))
    pki.key.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    pki.key.chmod(0o600)
    return pki


# -- a registry ------------------------------------------------------------------------------


def add_capsule(registry: Path, src: Path, name: str, *, spawn_allow: tuple[str, ...] = (), script: str = "") -> str:
    """Pack a small capsule (entrypoint ``main.py``) into ``registry``; its sha256."""
    d = src / name
    d.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"name": name, "version": "0.1.0", "entrypoint": ["main.py"]}
    if spawn_allow:
        manifest["capabilities"] = {"spawn": {"allow": list(spawn_allow)}}
    (d / "main.py").write_text("#!/usr/bin/env python3\n" + (script or "print('done')\n"))
    (d / "main.py").chmod(0o755)
    (d / "murmur.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return pack_capsule(d, registry).sha256


# -- an in-process daemon ----------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running(tmp_path: Path, registry: Path, **overrides: Any) -> AsyncIterator[InProcessDaemon]:
    values: dict[str, Any] = {
        "port": 0,
        "registry_path": registry,
        "state_dir": tmp_path / "state",
        "log_format": "json",
    }
    values.update(overrides)
    roost = Roost(Config.model_validate(values))
    await roost.start()
    try:
        yield InProcessDaemon(roost)
    finally:
        await roost.stop()


# -- a daemon process --------------------------------------------------------------------------

_LOCAL_RE = re.compile(r"mur-roost: listening on (\S+):(\d+)")
_NETWORK_RE = re.compile(r"mur-roost: listening for other hosts at (\S+)")


@dataclass
class DaemonProc:
    proc: subprocess.Popen[bytes]
    port: int
    network_url: str | None
    lines: list[str] = field(default_factory=list)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def start_daemon(args: list[str], *, prefix: tuple[str, ...] = (), timeout: float = 30) -> DaemonProc:
    """``python -m roost`` (behind ``prefix``, e.g. nsenter) until it says where it listens."""
    cmd = [*prefix, sys.executable, "-m", "roost", "--port", "0", "--log-format", "json", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    lines: list[str] = []
    port: int | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        raw = proc.stderr.readline()
        if not raw:
            break
        line = raw.decode(errors="replace").rstrip("\n")
        lines.append(line)
        m = _LOCAL_RE.search(line)
        if m:
            port = int(m.group(2))
            continue
        n = _NETWORK_RE.search(line)
        if n and port is not None:
            daemon = DaemonProc(proc, port, n.group(1), lines)
            threading.Thread(target=_drain, args=(daemon,), daemon=True).start()
            return daemon
    proc.kill()
    proc.wait()
    raise AssertionError("daemon did not start:\n" + "\n".join(lines))


def _drain(daemon: DaemonProc) -> None:
    assert daemon.proc.stderr is not None
    for raw in daemon.proc.stderr:
        daemon.lines.append(raw.decode(errors="replace").rstrip("\n"))


def run_refused(args: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """``python -m roost`` expected to refuse to start: its exit status and output."""
    cmd = [sys.executable, "-m", "roost", "--port", "0", "--log-format", "json", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


# -- a network namespace -----------------------------------------------------------------------


class NetNs:
    """A network namespace with SERVER_IP and CLIENT_IP on its loopback device."""

    def __init__(self) -> None:
        script = (
            f"ip link set lo up && ip addr add {SERVER_IP}/32 dev lo && ip addr add {CLIENT_IP}/32 dev lo "
            "&& echo ready && exec sleep 3600"
        )
        self.holder = subprocess.Popen(
            ["unshare", "-n", "sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.holder.stdout is not None
        line = self.holder.stdout.readline()
        if line.strip() != b"ready":
            err = self.holder.stderr.read().decode(errors="replace") if self.holder.stderr else ""
            self.close()
            raise OSError(f"cannot make a network namespace: {err.strip() or 'unshare -n failed'}")
        self.path = f"/proc/{self.holder.pid}/ns/net"

    @property
    def prefix(self) -> tuple[str, ...]:
        return ("nsenter", f"--net={self.path}")

    def run(self, fn: Callable[[], Awaitable[T]], timeout: float = 120) -> T:
        """Run ``fn()`` on a fresh event loop on a thread that joined the namespace."""
        box: dict[str, Any] = {}

        def body() -> None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    if libc.setns(fd, _CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns failed")
                finally:
                    os.close(fd)
                box["value"] = asyncio.run(fn())  # type: ignore[arg-type]
            except BaseException as exc:
                box["error"] = exc

        t = threading.Thread(target=body, name="in-netns")
        t.start()
        t.join(timeout)
        assert not t.is_alive(), "the namespaced client did not finish"
        if "error" in box:
            raise box["error"]
        return box["value"]  # type: ignore[no-any-return]

    def close(self) -> None:
        if self.holder.poll() is None:
            self.holder.kill()
        self.holder.wait()


@contextlib.contextmanager
def netns_or_skip() -> Iterator[NetNs]:
    if shutil.which("unshare") is None or shutil.which("nsenter") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare, nsenter and ip (util-linux, iproute2) to give the test a non-loopback address")
    try:
        ns = NetNs()
    except OSError as exc:
        pytest.skip(f"no network namespace here: {exc}")
    try:
        yield ns
    finally:
        ns.close()


@dataclass(frozen=True)
class RemoteDaemon:
    """A daemon serving TLS on SERVER_IP inside a network namespace, and a keeper token of its key."""

    ns: NetNs
    daemon: DaemonProc
    pki: Pki
    keeper_token: str


@contextlib.contextmanager
def tls_daemon(tmp_path: Path, registry: Path, spawn_allow: str) -> Iterator[RemoteDaemon]:
    """The real ``mur-roost`` with ``listen`` on SERVER_IP over TLS (its state in ``tmp_path/state``),
    reachable from CLIENT_IP through ``ns.run``; stopped, and its exit status checked, on leaving."""
    pki = make_pki(tmp_path / "pki", ips=("127.0.0.1", SERVER_IP))
    state = tmp_path / "state"
    with netns_or_skip() as ns:
        daemon = start_daemon(
            [
                "--state-dir", str(state),
                "--registry-path", str(registry),
                "--spawn-allow", spawn_allow,
                "--listen", f"{SERVER_IP}:0",
                "--tls-cert", str(pki.cert),
                "--tls-key", str(pki.key),
            ],
            prefix=ns.prefix,
        )  # fmt: skip
        try:
            assert daemon.network_url is not None and daemon.network_url.startswith(f"https://{SERVER_IP}:")
            yield RemoteDaemon(ns, daemon, pki, keeper_token(KeyRing.load_or_create(state), "node-a"))
        finally:
            assert daemon.stop() == 0

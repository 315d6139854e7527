"""What TLS on the network listener costs: requests and artifact fetches, plain vs TLS, same run.

One daemon serves both listeners on loopback: ``bind`` (plain HTTP, the host's listener) and
``listen`` with a certificate from a CA made for the run. Rounds alternate (plain, TLS, plain,
…) and the median of each is reported with the ratio:

* ``POST /renew`` with a session credential, wrk, kept-alive connections (a child on another
  node calling the daemon; the handshake is paid once per connection, as a real child does);
* the same with ``Connection: close`` (every request a new connection: the handshake's cost);
* a node keeper's ``fetch_artifact`` of an 8 MiB artifact into an empty cache (stream, sha256
  check, fsync, rename), in MiB/s.

Run: python bench/bench_network.py [--seconds 5] [--rounds 3] [--fetches 5] [--mib 8]
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import make_registry, post_json, start_daemon, wrk
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from roost.backends.ray.node.artifactfetch import fetch_artifact_blocking
from roost.services.artifactserve import keeper_token
from roost.state.keys import KeyRing


def make_pki(d: Path) -> tuple[Path, Path, Path]:
    """A CA and a certificate for 127.0.0.1 it signed: (ca.pem, cert.pem, key.pem)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench daemon")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths = (d / "ca.pem", d / "cert.pem", d / "key.pem")
    paths[0].write_bytes(ca.public_bytes(pem))
    paths[1].write_bytes(cert.public_bytes(pem))
    paths[2].write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return paths


def network_url(log: Path) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = re.search(rb"listening for other hosts at (\S+)", log.read_bytes())
        if m:
            return m.group(1).decode()
        time.sleep(0.05)
    raise SystemExit("the daemon did not say where it listens for other hosts")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fetches", type=int, default=5)
    ap.add_argument("--mib", type=int, default=8)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-network-"))
    registry = tmp / "registry"
    registry.mkdir()
    make_registry(registry, {"orchestrator": {}})
    big = tmp / "src" / "big"
    big.mkdir(parents=True)
    (big / "murmur.yaml").write_text("name: big\nversion: 0.1.0\n")
    (big / "payload.bin").write_bytes(os.urandom(args.mib * 1024 * 1024))  # incompressible
    from roost.state.registry.packing import pack_capsule

    sha = pack_capsule(big, registry).sha256
    ca, cert, key = make_pki(tmp)
    state = tmp / "state"
    d = start_daemon(
        ["--state-dir", str(state), "--registry-path", str(registry), "--spawn-allow", "orchestrator",
         "--listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key)]
    )  # fmt: skip
    try:
        assert d.log is not None
        tls_url = network_url(d.log)
        plain_url = d.url
        cred = post_json(
            plain_url + "/register",
            {"session_id": "ses_" + os.urandom(8).hex(), "name": "orchestrator", "version": "0.1.0"},
        )["credential"]
        token = keeper_token(KeyRing.load_or_create(state), "bench-node")
        hdr = {"x-murmur-spawn-credential": cred}
        results: dict[str, dict[str, list[float]]] = {}
        for _ in range(args.rounds):
            for name, base in (("plain", plain_url), ("tls", tls_url)):
                r = results.setdefault(name, {"keepalive_rps": [], "close_rps": [], "fetch_mibs": []})
                ka = wrk(base + "/renew", method="POST", headers=hdr, connections=20, seconds=args.seconds)
                close = {**hdr, "connection": "close"}
                cl = wrk(base + "/renew", method="POST", headers=close, connections=20, seconds=args.seconds)
                if ka.non2xx or cl.non2xx:
                    raise SystemExit(f"{name}: {ka.non2xx + cl.non2xx} answers were not 2xx")
                r["keepalive_rps"].append(ka.rps)
                r["close_rps"].append(cl.rps)
                times = []
                for i in range(args.fetches):
                    cache = tmp / f"cache-{name}-{time.monotonic_ns()}-{i}"
                    t0 = time.perf_counter()
                    fetch_artifact_blocking(base, sha, cache, token=token, ca=ca)
                    times.append(time.perf_counter() - t0)
                r["fetch_mibs"].append(args.mib / statistics.median(times))
        print(f"bench_network: {args.rounds} alternating rounds, {args.seconds}s wrk runs, {args.mib} MiB artifact")
        for metric, unit in (("keepalive_rps", "req/s"), ("close_rps", "req/s"), ("fetch_mibs", "MiB/s")):
            p = statistics.median(results["plain"][metric])
            t = statistics.median(results["tls"][metric])
            print(f"  {metric:14s} plain {p:10.1f} {unit}   tls {t:10.1f} {unit}   tls/plain {t / p:5.2f}")
    finally:
        d.stop()


if __name__ == "__main__":
    main()

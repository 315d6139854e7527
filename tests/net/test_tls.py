"""TLS on the network listener, tested on loopback with a CA made at test time.

The daemon serves ``listen = 127.0.0.1:0`` with a certificate the test CA signed; clients
verify against that CA (aiohttp with an ``ssl.SSLContext``, ``roost-capsule`` through
``MURMUR_ROOST_CA``, ``roostctl doctor --ca``), and a client without it fails with a sentence
that says what to set.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import aiohttp
import pytest

from roost.system.tlsclient import CA_ENV, TrustError, client_ssl_context, untrusted_sentence
from tests.net.support import add_capsule, make_pki, run_refused, running


async def test_clients_verify_the_listener_against_the_ca(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    registry = tmp_path / "registry"
    registry.mkdir()
    async with running(tmp_path, registry, listen="127.0.0.1:0", tls_cert=pki.cert, tls_key=pki.key) as d:
        url = d.network_url
        assert url is not None and url.startswith("https://127.0.0.1:") and d.url.startswith("http://")
        # Loopback over TLS is still this host: everything answers as on the plain listener.
        conn = aiohttp.TCPConnector(ssl=client_ssl_context(pki.ca))
        async with aiohttp.ClientSession(connector=conn) as http:
            async with http.get(url + "/health") as resp:
                assert resp.status == 200 and await resp.json() == {}
            async with http.get(url + "/metrics") as resp:
                assert resp.status == 200
        assert d.network_port is not None
        _, writer = await asyncio.open_connection("127.0.0.1", d.network_port, ssl=client_ssl_context(pki.ca))
        assert writer.get_extra_info("ssl_object").version() in ("TLSv1.2", "TLSv1.3")
        writer.close()
        await writer.wait_closed()
        # The plain listener is untouched by TLS.
        async with aiohttp.ClientSession() as http, http.get(d.url + "/health") as resp:
            assert resp.status == 200
        # Without the CA (the system store only), or trusting another CA: refused, with a sentence.
        for ctx in (client_ssl_context(env={}), client_ssl_context(pki.other_ca)):
            conn = aiohttp.TCPConnector(ssl=ctx)
            async with aiohttp.ClientSession(connector=conn) as http:
                with pytest.raises(aiohttp.ClientConnectorCertificateError) as info:
                    await http.get(url + "/health")
            sentence = untrusted_sentence(info.value, url)
            assert sentence is not None
            assert sentence.startswith(f"the TLS certificate of mur-roost at {url} is not trusted (")
            assert sentence.endswith(f"set {CA_ENV} (or pass --ca) to the PEM file of the CA that signed it")
        # Plain HTTP to the TLS port is no way in.
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.ClientError):
                async with http.get(url.replace("https://", "http://") + "/health") as resp:
                    await resp.read()


def test_a_ca_file_that_cannot_be_used_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(TrustError, match=rf"^cannot read the CA file {tmp_path}/nope.pem \(--ca / {CA_ENV}\): no such"):
        client_ssl_context(tmp_path / "nope.pem")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(TrustError, match="holds no PEM certificate"):
        client_ssl_context(env={CA_ENV: str(junk)})


async def _capsule(args: list[str], env: dict[str, str]) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "roost.capsule", *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    return proc, line.decode()


async def test_roost_capsule_trusts_the_ca_from_murmur_roost_ca(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    registry = tmp_path / "registry"
    registry.mkdir()
    script = "import time\ntime.sleep(60)\n"
    add_capsule(registry, tmp_path / "src", "spawny", spawn_allow=("spawny",), script=script)
    async with running(
        tmp_path, registry, listen="127.0.0.1:0", tls_cert=pki.cert, tls_key=pki.key, spawn_allow=("spawny",)
    ) as d:
        url = d.network_url
        assert url is not None
        base = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
        base["MURMUR_ROOST_URL"] = url
        args = ["run", "spawny@0.1.0", "--registry-path", str(registry), "--json"]
        # Without the CA: the launch is refused with the sentence, never run unrefereed.
        proc, ready = await _capsule([*args, "--workdir", str(tmp_path / "a")], base)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 1 and ready == ""
        last = err.decode().strip().splitlines()[-1]
        assert last.startswith(f"roost-capsule: failed to register this session with mur-roost at {url}: ")
        assert "is not trusted (" in last and f"set {CA_ENV} (or pass --ca)" in last
        # A CA file that is not there: refused before anything runs.
        proc, ready = await _capsule(
            [*args, "--workdir", str(tmp_path / "b")], {**base, CA_ENV: str(tmp_path / "missing.pem")}
        )
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 1 and "cannot read the CA file" in err.decode()
        # With it: registered over TLS.
        proc, ready = await _capsule([*args, "--workdir", str(tmp_path / "c")], {**base, CA_ENV: str(pki.ca)})
        try:
            session_id = json.loads(ready)["session_id"]
            rec = d.roost.table.get(session_id)
            assert rec is not None and rec.running and rec.coordinates == "spawny@0.1.0"
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.communicate(), 30)


async def test_roostctl_doctor_checks_the_network_listener_with_ca(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    registry = tmp_path / "registry"
    registry.mkdir()
    async with running(
        tmp_path,
        registry,
        listen="127.0.0.1:0",
        tls_cert=pki.cert,
        tls_key=pki.key,
        advertise_url="https://roost.example:7443",
    ) as d:
        sock = str(d.config.admin_socket_path)

        async def doctor(*extra: str) -> dict[str, dict[str, str]]:
            env = {k: v for k, v in os.environ.items() if k != CA_ENV}
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "roost.ctl.main", "doctor", "--json", "--socket", sock, *extra,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
            )  # fmt: skip
            out, _ = await asyncio.wait_for(proc.communicate(), 60)
            return {f["check"]: f for f in json.loads(out)["findings"]}

        found = await doctor("--ca", str(pki.ca))
        assert found["network-tls"]["status"] == "ok", found["network-tls"]
        assert found["advertise-url"]["status"] == "ok"
        assert "https://roost.example:7443" in found["advertise-url"]["detail"]
        found = await doctor()
        assert found["network-tls"]["status"] == "fail"
        assert "is not trusted" in found["network-tls"]["detail"] and "--ca" in found["network-tls"]["fix"]


async def test_advertise_url_defaults_to_the_local_url(tmp_path: Path) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    async with running(tmp_path, registry) as d:
        assert d.advertise_url == d.url and d.network_url is None
    async with running(tmp_path, registry, advertise_url="https://head.example:7443/") as d:
        assert d.advertise_url == "https://head.example:7443"


def test_certificates_that_cannot_be_loaded_refuse_the_start(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    other = make_pki(tmp_path / "other")
    base = ["--state-dir", str(tmp_path / "s"), "--registry-path", str(tmp_path), "--listen", "127.0.0.1:0"]
    proc = run_refused([*base, "--tls-cert", str(tmp_path / "none.pem"), "--tls-key", str(pki.key)])
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"mur-roost: cannot read the TLS certificate {tmp_path}/none.pem: No such file or directory"
    )
    proc = run_refused([*base, "--tls-cert", str(pki.cert), "--tls-key", str(other.key)])
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"mur-roost: cannot load the TLS certificate {pki.cert} with the key {other.key} (")
    assert last.endswith("both must be PEM, and the key must be the certificate's")
    proc = run_refused([*base, "--tls-cert", str(pki.cert)])
    assert proc.returncode == 1
    assert proc.stderr.strip() == "mur-roost: invalid --tls-key: tls_cert is set, so tls_key must be too"

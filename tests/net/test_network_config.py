"""Network settings: parsing, the plaintext rule, the flags and their help (pure; no daemon)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.cli import USAGE, parse_args, resolve_config
from roost.core.loopback import is_loopback_host
from roost.daemon.network import plaintext_refusal
from roost.state.config import Config, ConfigError, load_toml, parse_advertise_url, parse_listen
from roost.state.lifecycle import url_for


def _cfg(tmp_path: Path, **values: Any) -> Config:
    return Config.model_validate({"registry_path": tmp_path, "state_dir": tmp_path / "s", **values})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.0.0.0:7443", ("0.0.0.0", 7443)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::]:7443", ("::", 7443)),
        ("[fd00::2]:1", ("fd00::2", 1)),
        ("192.0.2.2:65535", ("192.0.2.2", 65535)),
    ],
)
def test_listen_parses(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("7443", "is not host:port"),
        (":7443", "is not host:port"),
        ("example.com:7443", "is not an IP address"),
        ("0.0.0.0:http", "is not a port"),
        ("0.0.0.0:65536", "is not a port"),
        ("::1:7443", "goes in brackets"),
    ],
)
def test_listen_refuses(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_listen(text)


@given(st.ip_addresses(), st.integers(0, 65535))
def test_listen_round_trips_any_address(addr: Any, port: int) -> None:
    host = str(addr)
    text = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    assert parse_listen(text) == (host, port)
    assert url_for(host, port, tls=True) == f"https://{text}"


def test_advertise_url() -> None:
    assert parse_advertise_url("https://head.example:7443/") == "https://head.example:7443"
    assert parse_advertise_url("http://10.0.0.5:7700") == "http://10.0.0.5:7700"
    for bad in ("head:7443", "ftp://x", "https://", "https://h/path", "https://u@h", "https://h?q", "https://h:99999"):
        with pytest.raises(ValueError):
            parse_advertise_url(bad)


def test_loopback_hosts() -> None:
    assert is_loopback_host("127.0.0.1") and is_loopback_host("127.8.9.1") and is_loopback_host("::1")
    assert is_loopback_host("localhost")
    for host in ("0.0.0.0", "::", "192.0.2.2", "10.77.0.1", "fd00::2", "example.com"):
        assert not is_loopback_host(host)


def test_the_plaintext_rule(tmp_path: Path) -> None:
    # Defaults: loopback only, no refusal (nothing changes for anyone who sets nothing).
    assert plaintext_refusal(_cfg(tmp_path)) is None
    assert plaintext_refusal(_cfg(tmp_path, listen="127.0.0.1:7443")) is None
    refused = plaintext_refusal(_cfg(tmp_path, listen="0.0.0.0:7443"))
    assert refused is not None and refused.startswith(
        "refusing to serve plain HTTP on listen 0.0.0.0:7443, which is not a loopback address"
    )
    assert plaintext_refusal(_cfg(tmp_path, listen="0.0.0.0:7443", allow_plaintext_network=True)) is None
    tls = {"tls_cert": tmp_path / "c.pem", "tls_key": tmp_path / "k.pem"}
    assert plaintext_refusal(_cfg(tmp_path, listen="0.0.0.0:7443", **tls)) is None
    # The host listener never has TLS: a non-loopback bind needs the opt-in as well as allow_remote.
    remote_bind = plaintext_refusal(_cfg(tmp_path, bind="192.0.2.2", allow_remote=True))
    assert remote_bind is not None and "192.0.2.2:7700" in remote_bind and "listen with tls_cert" in remote_bind
    assert plaintext_refusal(_cfg(tmp_path, bind="192.0.2.2", allow_remote=True, allow_plaintext_network=True)) is None


def test_flags_and_toml_keys(tmp_path: Path) -> None:
    for flag in (
        "--listen HOST:PORT",
        "--tls-cert FILE",
        "--tls-key FILE",
        "--allow-plaintext-network",
        "--advertise-url",
    ):
        assert flag in USAGE
    argv = [
        "--registry-path", str(tmp_path), "--state-dir", str(tmp_path / "s"),
        "--listen", "0.0.0.0:7443", "--tls-cert", "c.pem", "--tls-key", "k.pem",
        "--advertise-url", "https://head:7443", "--allow-plaintext-network",
    ]  # fmt: skip
    cfg = resolve_config(parse_args(argv)[1])
    assert cfg.listen_address == ("0.0.0.0", 7443)
    assert cfg.tls_cert == Path("c.pem").absolute() and cfg.tls_key == Path("k.pem").absolute()
    assert cfg.advertise_url == "https://head:7443" and cfg.allow_plaintext_network
    toml = tmp_path / "conf" / "roost.toml"
    toml.parent.mkdir()
    toml.write_text(
        'listen = "[::]:7443"\ntls_cert = "tls/cert.pem"\ntls_key = "tls/key.pem"\n'
        'advertise_url = "https://head.example:7443"\nallow_plaintext_network = false\n'
    )
    values = load_toml(toml)
    assert values["tls_cert"] == str(tmp_path / "conf" / "tls" / "cert.pem")  # relative to the file
    assert values["listen"] == "[::]:7443"


def test_cross_field_sentences(tmp_path: Path) -> None:
    base = ["--registry-path", str(tmp_path), "--state-dir", str(tmp_path / "s")]
    with pytest.raises(ConfigError, match=r"^invalid --tls-cert: tls_key is set, so tls_cert must be too$"):
        resolve_config(parse_args([*base, "--listen", "0.0.0.0:1", "--tls-key", "k"])[1])
    with pytest.raises(ConfigError, match=r"^invalid --tls-cert: TLS serves the network listener"):
        resolve_config(parse_args([*base, "--tls-cert", "c", "--tls-key", "k"])[1])
    with pytest.raises(ConfigError, match=r"^invalid --listen: 'example.com' is not an IP address"):
        resolve_config(parse_args([*base, "--listen", "example.com:1"])[1])
    with pytest.raises(ConfigError, match=r"^invalid --advertise-url: "):
        resolve_config(parse_args([*base, "--advertise-url", "head:7443"])[1])

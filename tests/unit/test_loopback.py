"""roost.core.loopback: the one "is this address this host's own" test, for names and peer addresses."""

from __future__ import annotations

import pytest

from roost.core.loopback import is_loopback_host, is_loopback_peer

LOCAL = ["127.0.0.1", "127.8.9.1", "::1", "::ffff:127.0.0.1", "::ffff:127.1.2.3"]
REMOTE = ["0.0.0.0", "::", "192.0.2.2", "10.77.0.1", "fd00::2", "::ffff:10.0.0.1", "128.0.0.1", "fe80::1%eth0"]
NOT_ADDRESSES = ["example.com", "localhost.example", "127.0.0.1.nip.io", "", " 127.0.0.1", "LOCALHOST"]


@pytest.mark.parametrize("host", [*LOCAL, "localhost"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize("host", [*REMOTE, *NOT_ADDRESSES])
def test_other_hosts(host: str) -> None:
    assert not is_loopback_host(host)


@pytest.mark.parametrize("remote", [*LOCAL, None, "", "::1%lo"])
def test_local_peers(remote: str | None) -> None:
    """No address at all is a unix socket: this host."""
    assert is_loopback_peer(remote)


@pytest.mark.parametrize("remote", [*REMOTE, "localhost", "example.com"])
def test_remote_peers(remote: str) -> None:
    """A peer address is numeric: a name (even "localhost") is not taken on its word."""
    assert not is_loopback_peer(remote)

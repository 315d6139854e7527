"""Listening for other hosts: the plaintext rule, the TLS server context, the network listener.

The daemon's ``bind`` listener is the host's own (plain HTTP, loopback unless ``allow_remote``),
as it always was. ``listen`` adds a second listener for children and keepers on other nodes,
served with TLS from ``tls_cert``/``tls_key``. A listener on a non-loopback address that would
carry plain HTTP is refused at start-up (exit 7) unless the operator says the network is private
(``allow_plaintext_network``): credentials and approvals cross it as bearer tokens. Which
endpoints a caller that is not on loopback reaches is :mod:`roost.http.reach`'s one rule.
docs/operations.md, "Network".
"""

from __future__ import annotations

import ssl

from aiohttp import web

from roost.core.loopback import is_loopback_host
from roost.daemon.startup import EXIT_PLAINTEXT, StartupError
from roost.http.server import bound_port
from roost.state.config import Config
from roost.system.blocking import BlockingExecutor

__all__ = ["listeners", "plaintext_refusal", "server_ssl_context", "start_network_listener"]


def plaintext_refusal(cfg: Config) -> str | None:
    """The one-sentence refusal for a non-loopback listener that would speak plain HTTP, or None."""
    if cfg.allow_plaintext_network:
        return None
    if not is_loopback_host(cfg.bind):
        return (
            f"refusing to serve plain HTTP on {cfg.bind}:{cfg.port}, which is not a loopback address: "
            "credentials would cross the network in the clear; keep bind on loopback and serve other hosts "
            "on listen with tls_cert and tls_key, or set allow_plaintext_network = true on a private network"
        )
    address = cfg.listen_address
    if address is not None and cfg.tls_cert is None and not is_loopback_host(address[0]):
        return (
            f"refusing to serve plain HTTP on listen {cfg.listen}, which is not a loopback address: "
            "credentials would cross the network in the clear; set tls_cert and tls_key, "
            "or set allow_plaintext_network = true on a private network"
        )
    return None


def server_ssl_context(cfg: Config) -> ssl.SSLContext | None:
    """The TLS context of the network listener (blocking: reads the PEM files); None without TLS."""
    if cfg.tls_cert is None or cfg.tls_key is None:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    for what, path in (("certificate", cfg.tls_cert), ("key", cfg.tls_key)):
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise StartupError(f"cannot read the TLS {what} {path}: {exc.strerror or exc}") from None
    try:
        ctx.load_cert_chain(cfg.tls_cert, cfg.tls_key)
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc.strerror or type(exc).__name__
        raise StartupError(
            f"cannot load the TLS certificate {cfg.tls_cert} with the key {cfg.tls_key} ({reason}): "
            "both must be PEM, and the key must be the certificate's"
        ) from None
    return ctx


def check_listeners(cfg: Config) -> None:
    """Refuse a plaintext non-loopback listener (exit 7) before anything is bound or opened."""
    refusal = plaintext_refusal(cfg)
    if refusal is not None:
        raise StartupError(refusal, EXIT_PLAINTEXT)


async def start_network_listener(cfg: Config, executor: BlockingExecutor, runner: web.AppRunner) -> int | None:
    """Open the ``listen`` listener on ``runner`` (same app, same guard); its port, or None.

    Raises :class:`StartupError` for a certificate that cannot be loaded or an address in use.
    """
    address = cfg.listen_address
    if address is None:
        return None
    ctx = await executor.run(server_ssl_context, cfg)
    host, port = address
    site = web.TCPSite(runner, host, port, ssl_context=ctx, reuse_address=True, backlog=4096)
    try:
        await site.start()
    except OSError as exc:
        raise StartupError(f"failed to listen on {cfg.listen}: {exc.strerror or exc}") from None
    return bound_port(site) or port


def listeners(cfg: Config, port: int | None, network_port: int | None) -> list[tuple[str, int]]:
    """The daemon's bound listeners as (host, port): the ``bind`` one, and ``listen``'s if any."""
    out = [(cfg.bind, port)] if port else []
    address = cfg.listen_address
    if address is not None and network_port:
        out.append((address[0], network_port))
    return out

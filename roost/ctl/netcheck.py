"""``roostctl doctor``'s network findings: the ``listen`` listener answers, and its TLS verifies.

The daemon's status names its network listener (``network_url``) and the URL children on other
nodes are given (``advertise_url``). The check fetches ``/health`` from the listener the way a
remote child would — verifying the certificate against the system store plus ``--ca`` (else
``$MURMUR_ROOST_CA``) — and says what to set when that fails. Stdlib only (``urllib``, ``ssl``),
as roostctl's start-up budget wants. docs/operations.md, "Network".
"""

from __future__ import annotations

import os
from collections.abc import Callable

from roost.core.admin_models import StatusAnswer
from roost.core.loopback import is_loopback_host

__all__ = ["check_network"]

Add = Callable[[str, str, str, str], None]


def _host_of(url: str) -> str:
    rest = url.split("://", 1)[-1]
    host = rest.rsplit(":", 1)[0] if not rest.startswith("[") else rest[1 : rest.find("]")]
    return host


def check_network(add: Add, status: StatusAnswer | None, ca: str | None, *, timeout: float = 10.0) -> None:
    if status is None:
        return
    # Imported here: urllib pulls in the email package, which roostctl's other verbs never pay for.
    import urllib.error
    import urllib.request

    from roost.system.tlsclient import CA_ENV, TrustError, context_for, untrusted_sentence

    network = status["network_url"]
    advertised = str(status["advertise_url"] or status["url"] or "")
    if not isinstance(network, str):
        add("network", "ok", "no network listener (listen is unset): only this host reaches the daemon", "")
        return
    if is_loopback_host(_host_of(advertised)):
        add(
            "advertise-url",
            "warn",
            f"children on other nodes would be told to reach the daemon at {advertised}, a loopback address",
            "set advertise_url in roost.toml to the URL other nodes reach the listen listener at",
        )
    else:
        add("advertise-url", "ok", f"children on other nodes reach the daemon at {advertised}", "")
    where = ca or os.environ.get(CA_ENV) or "the system trust store"
    try:
        tls = context_for(network, ca)
    except TrustError as exc:
        add("network-tls", "fail", str(exc), f"point --ca or {CA_ENV} at the CA certificate (PEM)")
        return
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if tls is not None:
        handlers.append(urllib.request.HTTPSHandler(context=tls))
    try:
        with urllib.request.build_opener(*handlers).open(network + "/health", timeout=timeout) as resp:
            resp.read()
    except urllib.error.HTTPError as exc:
        add("network", "fail", f"{network}/health answered HTTP {exc.code}", "read the daemon's log")
        return
    except (urllib.error.URLError, OSError) as exc:
        sentence = untrusted_sentence(exc, network)
        if sentence is not None:
            add("network-tls", "fail", sentence, f"roostctl doctor --ca FILE, or export {CA_ENV}=FILE")
        else:
            reason = getattr(exc, "reason", None) or exc
            add("network", "fail", f"{network} does not answer: {reason}", "check listen and the firewall")
        return
    if tls is None:
        add("network", "warn", f"{network} answers in plain HTTP (allow_plaintext_network)", "set tls_cert and tls_key")
    else:
        add("network-tls", "ok", f"{network} answers over TLS; its certificate verifies against {where}", "")

"""The agent card a capsule door serves, and how a client reads a peer's dialect from a card.

Why both interfaces: the official SDK (1.x) picks the 1.0 JSON-RPC interface when the card lists
one, while murmur era-B peers and 0.3-era clients read the top-level ``url``/``protocolVersion``.
Listing 1.0 and 0.3 in ``supportedInterfaces`` and keeping the 0.3 top-level fields serves both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from a2a.protocol.models import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Dialect,
)

DOOR_EXTENSION_URI = "https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1"
CAPSULE_EXTENSION_URI = "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1"
CARD_PATH = "/.well-known/agent-card.json"
LEGACY_CARD_PATH = "/.well-known/agent.json"

METHODS_0_3 = ("message/send", "message/stream", "tasks/get", "tasks/list", "tasks/cancel", "tasks/resubscribe")
METHODS_1_0 = ("SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask")
PUSH_METHODS_0_3 = tuple(f"tasks/pushNotificationConfig/{m}" for m in ("set", "get", "list", "delete"))
PUSH_METHODS_1_0 = (
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
)
_SENDS = frozenset({"SendMessage", "SendStreamingMessage", "message/send", "message/stream"})


def build_card(
    *,
    name: str,
    version: str,
    url: str,
    session_id: str,
    accepts_tasks: bool = True,
    peer_tasks: bool = False,
    description: str | None = None,
    push_notifications: bool = False,
) -> AgentCard:
    """The card for one capsule session's door at ``url`` (``http://host:port``): it streams, and
    takes push-notification configs when ``push_notifications``."""
    methods = [m for m in (*METHODS_1_0, *METHODS_0_3) if accepts_tasks or m not in _SENDS]
    if push_notifications:
        methods += [*PUSH_METHODS_1_0, *PUSH_METHODS_0_3]
    skills = (
        [
            AgentSkill(
                id="task",
                name="Run a task",
                description=f"Send a text task to the {name} capsule; stream or poll the task for its result.",
                tags=["task"],
            )
        ]
        if accepts_tasks
        else []
    )
    return AgentCard(
        name=name,
        description=description or f"Murmur capsule {name} {version}",
        version=version,
        url=url,
        protocol_version="0.3",
        preferred_transport="JSONRPC",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=push_notifications,
            extended_agent_card=False,
            extensions=[
                AgentExtension(
                    uri=DOOR_EXTENSION_URI,
                    description="Methods this door serves and whether it takes tasks from peers",
                    required=False,
                    params={"methods": methods, "peerTasks": peer_tasks},
                ),
                AgentExtension(
                    uri=CAPSULE_EXTENSION_URI,
                    description="The murmur session behind this door",
                    required=False,
                    params={"sessionId": session_id},
                ),
            ],
        ),
        skills=skills,
    )


def _is_v1(version: object) -> bool:
    return isinstance(version, str) and (version == "1" or version.startswith("1."))


def interface_candidates(card: AgentCard) -> list[tuple[str | None, Dialect]]:
    """The card's JSON-RPC interfaces as ``(url, dialect)``, best first: every 1.x, then the rest as 0.3.

    A card without ``supportedInterfaces`` (0.3-era) offers its top-level ``url`` when its
    preferred transport is JSON-RPC (or unnamed), in the dialect of its ``protocolVersion``.
    """
    rpc = [i for i in card.supported_interfaces if i.protocol_binding.upper() == "JSONRPC"]
    out: list[tuple[str | None, Dialect]] = [(i.url, "1.0") for i in rpc if _is_v1(i.protocol_version)]
    out += [(i.url, "0.3") for i in rpc if not _is_v1(i.protocol_version)]
    if not card.supported_interfaces and (card.preferred_transport or "JSONRPC").upper() == "JSONRPC":
        out.append((card.url, "1.0" if _is_v1(card.protocol_version) else "0.3"))
    return out


def card_dialect(card: AgentCard | Mapping[str, Any]) -> Dialect:
    """``"1.0"`` if the card offers a 1.x JSON-RPC interface (or says 1.x at top level), else ``"0.3"``."""
    interfaces: list[tuple[object, object]]
    top: object
    if isinstance(card, AgentCard):
        interfaces = [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces]
        top = card.protocol_version
    else:
        raw = card.get("supportedInterfaces")
        interfaces = [
            (i.get("protocolBinding"), i.get("protocolVersion"))
            for i in (raw if isinstance(raw, list) else [])
            if isinstance(i, Mapping)
        ]
        top = card.get("protocolVersion")
    if any(str(b).upper() == "JSONRPC" and _is_v1(v) for b, v in interfaces):
        return "1.0"
    if not interfaces and _is_v1(top):
        return "1.0"
    return "0.3"


API_KEY, BEARER, CLIENT_CREDENTIALS = "api_key", "bearer", "oauth2_client_credentials"


def security_kinds(card: AgentCard) -> frozenset[str]:
    """Which of the schemes a client can answer with a configured secret the card declares:
    ``api_key`` (in a header), ``bearer`` (HTTP bearer) and ``oauth2_client_credentials``, read
    from both dialects' ``securitySchemes`` (1.0: ``{"apiKeySecurityScheme": …}``,
    ``{"httpAuthSecurityScheme": …}``, ``{"oauth2SecurityScheme": …}``; 0.3: ``{"type": …}``)."""
    kinds: set[str] = set()
    for scheme in card.security_schemes.values():
        if not isinstance(scheme, Mapping):
            continue
        kind = scheme.get("type")
        api = scheme.get("apiKeySecurityScheme")
        http = scheme.get("httpAuthSecurityScheme")
        oauth = scheme.get("oauth2SecurityScheme")
        if isinstance(api, Mapping):
            scheme, kind = api, "apiKey"
        elif isinstance(http, Mapping):
            scheme, kind = http, "http"
        elif isinstance(oauth, Mapping):
            scheme, kind = oauth, "oauth2"
        if kind == "apiKey" and str(scheme.get("in", scheme.get("location", "header"))).lower() == "header":
            kinds.add(API_KEY)
        elif kind == "http" and str(scheme.get("scheme", "")).lower() == "bearer":
            kinds.add(BEARER)
        elif kind == "oauth2":
            flows = scheme.get("flows")
            if isinstance(flows, Mapping) and isinstance(flows.get("clientCredentials"), Mapping):
                kinds.add(CLIENT_CREDENTIALS)
    return frozenset(kinds)

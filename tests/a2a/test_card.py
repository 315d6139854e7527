"""The door's agent card shape and dialect detection."""

from __future__ import annotations

from typing import Any

import pytest

from a2a.protocol.card import CAPSULE_EXTENSION_URI, DOOR_EXTENSION_URI, build_card, card_dialect


def test_card_shape() -> None:
    card = build_card(name="echo", version="1.2.3", url="http://127.0.0.1:9", session_id="ses_x", peer_tasks=True)
    j = card.to_json()
    assert j["name"] == "echo" and j["version"] == "1.2.3"
    assert j["description"] == "Murmur capsule echo 1.2.3"
    assert (j["url"], j["protocolVersion"], j["preferredTransport"]) == ("http://127.0.0.1:9", "0.3", "JSONRPC")
    assert j["supportedInterfaces"] == [
        {"url": "http://127.0.0.1:9", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "http://127.0.0.1:9", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
    ]
    caps = j["capabilities"]
    assert (caps["streaming"], caps["pushNotifications"], caps["extendedAgentCard"]) == (True, False, False)
    exts = {e["uri"]: e for e in caps["extensions"]}
    assert exts[CAPSULE_EXTENSION_URI]["params"] == {"sessionId": "ses_x"}
    assert exts[DOOR_EXTENSION_URI]["params"]["peerTasks"] is True
    assert "SendMessage" in exts[DOOR_EXTENSION_URI]["params"]["methods"]
    assert all(e["required"] is False for e in caps["extensions"])
    assert j["defaultInputModes"] == ["text/plain"] and j["defaultOutputModes"] == ["text/plain"]
    assert j["skills"] == [
        {"id": "task", "name": "Run a task", "description": j["skills"][0]["description"], "tags": ["task"]}
    ]
    assert j["securitySchemes"] == {}
    assert card_dialect(card) == "1.0" and card_dialect(j) == "1.0"


def test_card_without_tasks() -> None:
    j = build_card(name="n", version="1", url="http://h:1", session_id="s", accepts_tasks=False).to_json()
    assert j["skills"] == []
    methods = next(e for e in j["capabilities"]["extensions"] if e["uri"] == DOOR_EXTENSION_URI)["params"]["methods"]
    assert "message/send" not in methods and "tasks/get" in methods


@pytest.mark.parametrize(
    ("card", "dialect"),
    [
        ({"name": "x"}, "0.3"),
        ({"name": "x", "protocolVersion": "0.3.0", "url": "http://h"}, "0.3"),
        ({"name": "x", "protocolVersion": "1.0"}, "1.0"),
        (
            {
                "name": "x",
                "supportedInterfaces": [{"url": "u", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}],
            },
            "0.3",
        ),
        (
            {"name": "x", "supportedInterfaces": [{"url": "u", "protocolBinding": "GRPC", "protocolVersion": "1.0"}]},
            "0.3",
        ),
        (
            {
                "name": "x",
                "supportedInterfaces": [{"url": "u", "protocolBinding": "JSONRPC", "protocolVersion": "1.0.2"}],
            },
            "1.0",
        ),
        ({"name": "x", "supportedInterfaces": "garbage"}, "0.3"),
    ],
)
def test_card_dialect(card: dict[str, Any], dialect: str) -> None:
    assert card_dialect(card) == dialect

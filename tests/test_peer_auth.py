"""The relay authenticates to peers with the operator's credentials; capsules never see them.

Real local peers that demand each scheme (an API key header, a bearer token, OAuth 2.0 client
credentials), a token endpoint of our own on loopback, and a real daemon configured with
``peer_auth`` entries whose secrets are files it owns.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from a2a.door import Door, DoorTask, TaskOutcome
from tests.support.daemon import RunningDaemon
from tests.support.registry import RegistryBuilder
from tests.support.webserve import serve_app

CRED = "x-murmur-spawn-credential"


class Guarded:
    """A door behind a check of one header; its card declares ``schemes``. Records what it saw."""

    def __init__(self, schemes: dict[str, Any], header: str, expected: Any) -> None:
        self.schemes = schemes
        self.header = header
        self.expected = expected  # a value, or a callable deciding
        self.seen: list[dict[str, str]] = []

        async def runner(task: DoorTask) -> TaskOutcome:
            return TaskOutcome.completed("ok")

        self.door = Door(name="guarded", version="1", session_id="ses_g", runner=runner, peer_tasks_accept=True)
        self.app = web.Application()
        self.app.router.add_get("/.well-known/agent-card.json", self._card)
        self.app.router.add_post("/", self._post)

    async def _card(self, request: web.Request) -> web.Response:
        body = {
            "name": "guarded",
            "version": "1",
            "description": "needs a credential",
            "supportedInterfaces": [{"url": self.url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
            "securitySchemes": self.schemes,
        }
        return web.json_response(body)

    async def _post(self, request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.seen.append(headers)
        got = headers.get(self.header.lower())
        ok = self.expected(got) if callable(self.expected) else got == self.expected
        if not ok:
            return web.json_response({"error": "unauthorized", "message": "credential missing"}, status=401)
        return await self.door.handle(request)

    url = ""


class TokenServer:
    """An OAuth 2.0 token endpoint (client credentials, HTTP Basic client authentication)."""

    def __init__(self, client_id: str, secret: str, expires_in: int) -> None:
        self.client_id, self.secret, self.expires_in = client_id, secret, expires_in
        self.requests: list[dict[str, str]] = []
        self.app = web.Application()
        self.app.router.add_post("/token", self._token)

    async def _token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.requests.append({**{k: str(v) for k, v in form.items()}, "auth": request.headers.get("Authorization", "")})
        basic = "Basic " + base64.b64encode(f"{self.client_id}:{self.secret}".encode()).decode()
        if request.headers.get("Authorization") != basic or form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "invalid_client"}, status=401)
        n = len(self.requests)
        return web.json_response({"access_token": f"tok-{n}", "token_type": "Bearer", "expires_in": self.expires_in})

    def valid(self, value: str | None) -> bool:
        return value is not None and value.startswith("Bearer tok-")


def _secret(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text + "\n")
    os.chmod(path, mode)
    return path


async def _send(d: RunningDaemon, cred: str, url: str) -> tuple[int, Any]:
    status, body, _, _ = await d.call("POST", "/a2a/send", json={"peer_url": url, "text": "hi"}, headers={CRED: cred})
    return status, body


@pytest.fixture
async def sender(daemon_factory: Any, registry: RegistryBuilder) -> Any:
    registry.add("sender", capabilities={"network": {"allow": ["127.0.0.1"]}})
    return registry


async def test_each_scheme_is_answered_with_the_operators_credential(
    daemon_factory: Any, sender: RegistryBuilder, tmp_path: Path
) -> None:
    api = Guarded({"key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Api-Key"}}}, "X-Api-Key", "k-123")
    bearer = Guarded({"b": {"type": "http", "scheme": "bearer"}}, "Authorization", "Bearer bt-456")  # 0.3 shape
    tokens = TokenServer("roost", "cs-789", expires_in=31)  # refreshed 30 s before expiry: after 1 s here
    oauth = Guarded(
        {
            "o": {
                "oauth2SecurityScheme": {
                    "flows": {"clientCredentials": {"tokenUrl": "http://127.0.0.1:1/trap", "scopes": {}}}
                }
            }
        },
        "Authorization",
        tokens.valid,
    )
    other = Guarded(api.schemes, "X-Api-Key", "k-123")  # same card, an origin nobody configured
    async with (
        serve_app(api.app) as api_url,
        serve_app(bearer.app) as bearer_url,
        serve_app(oauth.app) as oauth_url,
        serve_app(other.app) as other_url,
        serve_app(tokens.app) as token_base,
    ):
        api.url, bearer.url, oauth.url, other.url = api_url + "/", bearer_url + "/", oauth_url + "/", other_url + "/"
        entries = [
            {
                "origin": api_url,
                "scheme": "api_key",
                "header": "X-Api-Key",
                "secret_file": str(_secret(tmp_path / "k", "k-123")),
            },
            {"origin": bearer_url, "scheme": "bearer", "secret_file": str(_secret(tmp_path / "b", "bt-456"))},
            {
                "origin": oauth_url,
                "scheme": "oauth2_client_credentials",
                "client_id": "roost",
                "token_url": token_base + "/token",
                "scopes": ["a2a.send", "a2a.read"],
                "secret_file": str(_secret(tmp_path / "o", "cs-789")),
            },
        ]
        d = await daemon_factory(sender.root, spawn_allow=("sender",), peer_auth=entries)
        (tmp_path / "w").mkdir(exist_ok=True)
        _, cred = await d.register_top("sender", workdir=str(tmp_path / "w"))
        for peer in (api, bearer, oauth):
            status, body = await _send(d, cred, peer.url)
            assert status == 200, body
            assert body["state"] == "submitted"
            assert not {"k-123", "bt-456", "cs-789"} & set(json.dumps(body).split('"'))  # never in the answer
        assert api.seen[-1]["x-api-key"] == "k-123" and "authorization" not in api.seen[-1]
        assert bearer.seen[-1]["authorization"] == "Bearer bt-456"
        assert oauth.seen[-1]["authorization"] == "Bearer tok-1"
        assert tokens.requests[0]["grant_type"] == "client_credentials"
        assert tokens.requests[0]["scope"] == "a2a.send a2a.read"

        assert (await _send(d, cred, oauth.url))[0] == 200  # the token is cached...
        assert len(tokens.requests) == 1
        await asyncio.sleep(1.2)
        assert (await _send(d, cred, oauth.url))[0] == 200  # ...and refreshed before it expires
        assert len(tokens.requests) == 2 and oauth.seen[-1]["authorization"] == "Bearer tok-2"

        status, body = await _send(d, cred, other.url)  # the same card at another origin gets nothing
        assert status == 502 and "401" in body["error"]
        assert "x-api-key" not in other.seen[-1] and "authorization" not in other.seen[-1]


async def test_a_secret_file_others_could_read_is_refused(
    daemon_factory: Any, sender: RegistryBuilder, tmp_path: Path
) -> None:
    peer = Guarded({"b": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}, "Authorization", "Bearer x")
    async with serve_app(peer.app) as url:
        peer.url = url + "/"
        loose = _secret(tmp_path / "loose", "s3cr3t-value", mode=0o644)
        d = await daemon_factory(
            sender.root,
            spawn_allow=("sender",),
            peer_auth=[{"origin": url, "scheme": "bearer", "secret_file": str(loose)}],
        )
        (tmp_path / "w").mkdir(exist_ok=True)
        _, cred = await d.register_top("sender", workdir=str(tmp_path / "w"))
        status, body = await _send(d, cred, peer.url)
    assert status == 502 and str(loose) in body["error"] and "mode 0600" in body["error"]
    assert "s3cr3t-value" not in body["error"] and peer.seen == []


def test_config_entries_are_checked(tmp_path: Path) -> None:
    from roost.state.config import Config, ConfigError, build_config, load_toml
    from roost.state.settings import RESTART_ONLY

    toml = tmp_path / "roost.toml"
    toml.write_text(
        '[roost]\nport = 0\n[[roost.peer_auth]]\norigin = "http://a:1"\nscheme = "api_key"\nheader = "X-Key"\n'
        'secret_file = "/etc/k"\n'
    )
    loaded = build_config(load_toml(toml))
    assert loaded.peer_auth[0].header == "X-Key" and loaded.peer_auth[0].origin == "http://a:1"
    assert "peer_auth" in RESTART_ONLY  # the relay reads its credentials' entries once

    with pytest.raises(ConfigError, match="api_key needs 'header'"):
        build_config({"peer_auth": [{"origin": "http://a:1", "scheme": "api_key", "secret_file": "/s"}]})
    with pytest.raises(ConfigError, match="absolute"):
        build_config({"peer_auth": [{"origin": "http://a:1", "scheme": "bearer", "secret_file": "rel"}]})
    with pytest.raises(ConfigError, match="not an origin"):
        build_config({"peer_auth": [{"origin": "http://a:1/path", "scheme": "bearer", "secret_file": "/s"}]})
    cfg = build_config({"peer_auth": [{"origin": "HTTP://Peer.Example", "scheme": "bearer", "secret_file": "/s"}]})
    assert isinstance(cfg, Config) and cfg.peer_auth[0].origin == "http://peer.example:80"

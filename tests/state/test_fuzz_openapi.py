"""Fuzz every endpoint the daemon documents in its own ``/openapi.json`` (schemathesis, bounded).

0 × 5xx, no traceback in any answer, and every answer conforms to the schema (status code,
content type, body). The one server error allowed is upstream's contract, exactly: ``/spawn`` and
``/register`` answer coordinates nothing is published at with ``500 {"error": "registry error
for '<name>/<version>': <reason>"}`` (docs/api.md), so a fuzzed 500 must be that sentence, for
the coordinates the case sent, and those coordinates must be unpublished. Requests carry a live session's
credential (and an approval), so the fuzzer gets past authentication into the parsers behind it.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.registry import RegistryBuilder

pytestmark = pytest.mark.slow
UPSTREAM_PATHS = frozenset({"/spawn", "/register"})
PUBLISHED = frozenset({("orchestrator", "0.1.0"), ("worker", "0.1.0")})


def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def assert_upstream_registry_500(path: str, sent_body: object, status: int, text: str) -> None:
    """The only contractual 5xx: upstream's registry error for unpublished coordinates."""
    label = (path, status, text[:300])
    assert status == 500, label
    assert path in UPSTREAM_PATHS, label
    body = json.loads(text)
    assert isinstance(body, dict) and set(body) == {"error"}, label
    error = body["error"]
    sent = sent_body if isinstance(sent_body, dict) else {}
    name, version = sent.get("name"), sent.get("version")
    assert isinstance(name, str) and isinstance(version, str), label  # anything else is a 400
    assert (name, version) not in PUBLISHED, label
    assert "\n" not in error, label
    if all(s.isprintable() and len(s) <= 80 for s in (name, version)):
        assert error.startswith(f"registry error for '{name}/{version}': "), label
    else:  # quoted made printable and shortened
        assert re.fullmatch(r"registry error for '.*/.*': .+", error), label


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProcess, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("fuzz")
    registry = RegistryBuilder(root=tmp / "registry", src=tmp / "src")
    registry.root.mkdir()
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    wd = tmp / "wd"
    wd.mkdir()
    d = start_daemon_process(
        ["--state-dir", str(tmp / "state"), "--registry-path", str(registry.root), "--spawn-allow", "orchestrator"]
    )
    sid = f"ses_{os.urandom(8).hex()}"
    cred = _post(
        d.url + "/register", {"session_id": sid, "name": "orchestrator", "version": "0.1.0", "workdir": str(wd)}
    )
    approval = _post(
        d.url + "/spawn", {"name": "worker", "version": "0.1.0"}, {"x-murmur-spawn-credential": cred["credential"]}
    )
    yield d, {"x-murmur-spawn-credential": cred["credential"], "x-murmur-spawn-approval": approval["approval"]}
    d.stop()


def test_every_endpoint(fuzzed: tuple[DaemonProcess, dict[str, str]]) -> None:
    d, headers = fuzzed
    schema = schemathesis.openapi.from_url(d.url + "/openapi.json")
    checks = [status_code_conformance, content_type_conformance, response_schema_conformance]
    examples = int(os.environ.get("ROOST_FUZZ_EXAMPLES", "15"))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 5
    failures: list[str] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def one(case: Any) -> None:
            case.headers = {**headers, **(case.headers or {})}
            response = case.call_and_validate(base_url=d.url, checks=checks)
            assert "Traceback" not in response.text
            if response.status_code >= 500:
                assert_upstream_registry_500(case.operation.path, case.body, response.status_code, response.text)

        try:
            one()
        except (Exception, BaseExceptionGroup) as exc:  # every operation is fuzzed; all failures are reported
            failures.append(f"{operation.label}: {str(exc)[:600]}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("path", sorted(UPSTREAM_PATHS))
def test_the_allowed_500_is_exactly_upstreams_registry_error(
    fuzzed: tuple[DaemonProcess, dict[str, str]], path: str
) -> None:
    """The fuzz's one allowed 5xx, reached on purpose: unpublished coordinates at /spawn and
    /register answer upstream's 500 sentence, and the fuzz's check accepts exactly that."""
    d, headers = fuzzed
    spawn = path == "/spawn"  # each allowed (spawn.allow, --spawn-allow), so resolving is reached
    sent = {"session_id": f"ses_{os.urandom(8).hex()}", "name": "worker" if spawn else "orchestrator", "version": "9.9"}
    hdrs = {"x-murmur-spawn-credential": headers["x-murmur-spawn-credential"]} if spawn else {}
    hdrs["content-type"] = "application/json"
    req = urllib.request.Request(d.url + path, data=json.dumps(sent).encode(), method="POST", headers=hdrs)
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=30)
    text = err.value.read().decode()
    assert_upstream_registry_500(path, sent, err.value.code, text)
    with pytest.raises(AssertionError):  # a published capsule's 500 would not pass
        assert_upstream_registry_500(path, {**sent, "version": "0.1.0"}, err.value.code, text)

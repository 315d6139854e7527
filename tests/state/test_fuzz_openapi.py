"""Fuzz every endpoint the daemon documents in its own ``/openapi.json`` (schemathesis, bounded).

0 × 5xx, no traceback in any answer, and every answer conforms to the schema (status code,
content type, body). The one server error allowed is upstream's contract, exactly: ``/spawn`` and
``/register`` answer coordinates nothing is published at with ``500 {"error": "registry error
for '<name>/<version>': <reason>"}`` (docs/api.md), so a fuzzed 500 must be that sentence, for
the coordinates the case sent, and those coordinates must be unpublished. Each case carries a
fresh live session's credential, an approval and a keeper token, over whatever the fuzzer
generated for them, so it gets past authentication into the parsers behind it (checked: each
authenticated endpoint answered something other than 403), and a fuzzed /deregister ends only
its own session. The daemon's log of the whole fuzz holds no traceback, no error event and no
token it handed out.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from roost.services.artifactserve import keeper_token
from roost.state.keys import KeyRing
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


@dataclass
class Fuzzed:
    """The fuzzed daemon and what a case needs to get past authentication."""

    daemon: DaemonProcess
    workdir: Path
    keeper: str  # a node keeper's token (GET /artifacts)
    issued: list[str] = field(default_factory=list)  # every token handed out: none may be logged

    def fresh(self) -> dict[str, str]:
        """A new live session's credential and an approval it was granted (a case may end the
        session or redeem the approval; the next case must not inherit that)."""
        sid = f"ses_{os.urandom(8).hex()}"
        body = {"session_id": sid, "name": "orchestrator", "version": "0.1.0", "workdir": str(self.workdir)}
        cred = _post(self.daemon.url + "/register", body)["credential"]
        approval = _post(
            self.daemon.url + "/spawn", {"name": "worker", "version": "0.1.0"}, {"x-murmur-spawn-credential": cred}
        )["approval"]
        self.issued += [cred, approval]
        return {"x-murmur-spawn-credential": cred, "x-murmur-spawn-approval": approval}

    def end(self, live: dict[str, str]) -> None:
        """End the case's session if the case did not (the per-user live-session quota)."""
        with contextlib.suppress(urllib.error.HTTPError):
            _post(self.daemon.url + "/deregister", {"outcome": "complete"}, live)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    tmp = tmp_path_factory.mktemp("fuzz")
    registry = RegistryBuilder(root=tmp / "registry", src=tmp / "src")
    registry.root.mkdir()
    registry.add("orchestrator", capabilities={"spawn": {"allow": ["worker"]}})
    registry.add("worker")
    wd = tmp / "wd"
    wd.mkdir()
    state = tmp / "state"
    d = start_daemon_process(
        ["--state-dir", str(state), "--registry-path", str(registry.root), "--spawn-allow", "orchestrator"]
    )
    keeper = keeper_token(KeyRing.load_or_create(state), "node-fuzz")
    yield Fuzzed(daemon=d, workdir=wd, keeper=keeper, issued=[keeper])
    d.stop()


# Each answers 403 to a case without a live credential (or keeper token): a fuzz whose cases
# all stopped there would never reach the parsers behind it.
AUTHENTICATED = ("/deregister", "/renew", "/handles", "/peer-fetch", "/artifacts/{sha256}", "/spawn", "/jobs/{job_id}")


def test_every_endpoint(fuzzed: Fuzzed) -> None:
    d = fuzzed.daemon
    schema = schemathesis.openapi.from_url(d.url + "/openapi.json")
    checks = [status_code_conformance, content_type_conformance, response_schema_conformance]
    examples = int(os.environ.get("ROOST_FUZZ_EXAMPLES", "15"))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 5
    failures: list[str] = []
    statuses: dict[str, Counter[int]] = {}
    logged_before = len(d.stderr_lines)
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def one(case: Any) -> None:
            live = fuzzed.fresh()
            # The live credential, approval and keeper token win over generated ones.
            case.headers = {**(case.headers or {}), **live, "authorization": f"Bearer {fuzzed.keeper}"}
            try:
                response = case.call_and_validate(base_url=d.url, checks=checks)
            finally:
                fuzzed.end(live)
            statuses.setdefault(case.operation.path, Counter())[response.status_code] += 1
            assert "Traceback" not in response.text
            if response.status_code >= 500:
                assert_upstream_registry_500(case.operation.path, case.body, response.status_code, response.text)

        try:
            one()
        except (Exception, BaseExceptionGroup) as exc:  # every operation is fuzzed; all failures are reported
            failures.append(f"{operation.label}: {str(exc)[:600]}")
    assert not failures, "\n\n".join(failures)
    for path in AUTHENTICATED:
        seen = statuses.get(path, Counter())
        assert sum(n for status, n in seen.items() if status != 403), f"{path}: all stopped at authentication {seen}"
    logged = d.stderr_lines[logged_before:]
    text = "\n".join(logged)
    assert "Traceback" not in text
    assert not [token for token in fuzzed.issued if token in text], "a token reached the daemon's log"
    errors = [ln for ln in logged if ln.startswith("{") and json.loads(ln).get("level") == "error"]
    assert not errors, errors[:5]


@pytest.mark.parametrize("path", sorted(UPSTREAM_PATHS))
def test_the_allowed_500_is_exactly_upstreams_registry_error(fuzzed: Fuzzed, path: str) -> None:
    """The fuzz's one allowed 5xx, reached on purpose: unpublished coordinates at /spawn and
    /register answer upstream's 500 sentence, and the fuzz's check accepts exactly that."""
    d, headers = fuzzed.daemon, fuzzed.fresh()
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

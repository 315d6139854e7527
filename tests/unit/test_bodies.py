"""Parsing at the edge: each body becomes a typed request, or one exact 400 sentence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.core.api_models import (
    A2ATaskRequest,
    DeregisterRequest,
    HandleRequest,
    PeerFetchRequest,
    RegisterRequest,
    SpawnRequest,
)
from roost.core.errors import BadRequest
from roost.core.fields import optional_str, require_ident, require_str
from roost.core.requests import LaunchRequest
from roost.http.bodies.admin import parse_drain, parse_end_reason
from roost.http.bodies.jobs import MAX_DEADLINE_SECS, parse_launch
from roost.http.bodies.peer import parse_fetch, parse_mint
from roost.http.bodies.referee import parse_deregister, parse_register, parse_spawn
from roost.http.bodies.relay import parse_task_call
from roost.services.peer.errors import BadPeerRequest

T = TypeVar("T")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def sentence(fn: Any, body: dict[str, Any]) -> str:
    with pytest.raises(BadRequest) as info:
        fn(body)
    assert info.value.status == 400
    return info.value.message


def parsed_or_refused(fn: Callable[[dict[str, Any]], T], body: dict[str, Any]) -> T | None:
    """The typed request, or None when refused with one 400 sentence on one line (nothing else)."""
    try:
        return fn(body)
    except BadRequest as exc:
        assert exc.status == 400 and exc.message and "\n" not in exc.message
        return None


def test_spawn_parses_to_its_typed_request() -> None:
    req = parse_spawn({"name": "worker", "version": "0.1.0", "extra": 1})
    assert isinstance(req, SpawnRequest) and (req.name, req.version) == ("worker", "0.1.0")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, "invalid JSON: missing field 'name'"),
        ({"name": 3, "version": "1"}, "invalid JSON: field 'name' must be a string"),
        ({"name": "w"}, "invalid JSON: missing field 'version'"),
        ({"name": "w", "version": None}, "invalid JSON: field 'version' must be a string"),
        ({"name": "a..b", "version": "1"}, "name must not be '.' or contain '..'"),
        ({"name": "w", "version": " "}, "version must not be empty"),
    ],
)
def test_spawn_sentences(body: dict[str, Any], expected: str) -> None:
    assert sentence(parse_spawn, body) == expected


def test_register_parses_and_normalises() -> None:
    req = parse_register(
        {
            "session_id": "ses_1",
            "name": "worker",
            "version": "0.1.0",
            "workdir": "/tmp//a/./b/",
            "pid": 42,
            "capsule_url": "http://127.0.0.1:8080/ignored/path",
            "containment": "scoped",
        }
    )
    assert isinstance(req, RegisterRequest)
    assert (req.session_id, req.name, req.version) == ("ses_1", "worker", "0.1.0")
    assert (req.workdir, req.pid, req.capsule_url, req.containment) == (
        "/tmp/a/b",
        42,
        "http://127.0.0.1:8080",
        "scoped",
    )


def test_register_optional_fields_default_to_none() -> None:
    req = parse_register({"session_id": "s", "name": "n", "version": "v"})
    assert (req.workdir, req.pid, req.capsule_url, req.containment) == (None, None, None, None)


BASE = {"session_id": "ses_1", "name": "worker", "version": "0.1.0"}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"session_id": None}, "invalid JSON: field 'session_id' must be a string"),
        ({"session_id": "a/b"}, "session_id must not contain '/' or '\\'"),
        ({"workdir": "relative"}, "workdir must be an absolute path"),
        ({"workdir": 5}, "workdir must be an absolute path"),
        ({"workdir": "/a\x00b"}, "workdir must be an absolute path"),
        ({"pid": 1}, "pid must be a process id (a whole number above 1)"),
        ({"pid": True}, "pid must be a process id (a whole number above 1)"),
        ({"pid": "12"}, "pid must be a process id (a whole number above 1)"),
        ({"capsule_url": 5}, "capsule_url must be a string"),
        ({"capsule_url": "https://h:1"}, "capsule_url must be http://<host>:<port> (the session's A2A door)"),
        ({"capsule_url": "http://h"}, "capsule_url must be http://<host>:<port> (the session's A2A door)"),
        ({"containment": "loose"}, "containment must be one of advisory, scoped, sealed"),
        # Checked in order: the first mistake is the one named.
        ({"pid": 0, "capsule_url": 1, "containment": "x"}, "pid must be a process id (a whole number above 1)"),
        ({"workdir": "x", "pid": 0}, "workdir must be an absolute path"),
    ],
)
def test_register_sentences(extra: dict[str, Any], expected: str) -> None:
    assert sentence(parse_register, {**BASE, **extra}) == expected


@pytest.mark.parametrize("outcome", ["complete", "failed"])
def test_deregister_outcomes(outcome: str) -> None:
    req = parse_deregister({"outcome": outcome})
    assert isinstance(req, DeregisterRequest) and req.outcome == outcome


@pytest.mark.parametrize(
    ("body", "shown"), [({}, ""), ({"outcome": "done"}, "done"), ({"outcome": 3}, "3"), ({"outcome": None}, "")]
)
def test_deregister_sentences(body: dict[str, Any], shown: str) -> None:
    assert sentence(parse_deregister, body) == f"outcome '{shown}' is not 'complete' or 'failed'"


def test_field_helpers() -> None:
    assert require_str({"k": "v"}, "k") == "v"
    assert require_ident({"k": "ok"}, "k") == "ok"
    assert optional_str({}, "k") is None and optional_str({"k": None}, "k") is None
    assert optional_str({"k": "v"}, "k") == "v"
    assert sentence(lambda b: optional_str(b, "k"), {"k": 1}) == "invalid JSON: field 'k' must be a string"


@given(
    st.dictionaries(
        st.sampled_from(["session_id", "name", "version", "workdir", "pid", "capsule_url", "containment", "x"]),
        json_values,
    )
)
def test_register_never_fails_other_than_with_a_sentence(body: dict[str, Any]) -> None:
    try:
        req = parse_register(body)
    except BadRequest as exc:
        assert exc.status == 400 and exc.message and "\n" not in exc.message
    else:
        assert all(isinstance(getattr(req, k), str) for k in ("session_id", "name", "version"))
        assert req.pid is None or (type(req.pid) is int and req.pid > 1)
        assert req.workdir is None or req.workdir.startswith("/")


@given(st.dictionaries(st.sampled_from(["name", "version", "outcome"]), json_values))
def test_spawn_and_deregister_never_fail_other_than_with_a_sentence(body: dict[str, Any]) -> None:
    for fn in (parse_spawn, parse_deregister):
        try:
            fn(body)
        except BadRequest as exc:
            assert exc.status == 400 and exc.message


# -- the peer plane's and the relay's bodies -----------------------------------------------------


def test_task_calls_parse_to_their_typed_request() -> None:
    req = parse_task_call({"peer_url": " http://127.0.0.1:9 ", "task_id": "t1"})
    assert isinstance(req, A2ATaskRequest) and (req.peer_url, req.task_id) == ("http://127.0.0.1:9", "t1")
    assert sentence(parse_task_call, {"task_id": "t"}) == "invalid JSON: missing field 'peer_url'"
    assert (
        sentence(parse_task_call, {"peer_url": "h:1", "task_id": 2}) == "invalid JSON: field 'task_id' must be a string"
    )
    assert sentence(parse_task_call, {"peer_url": " ", "task_id": "t"}) == "peer_url and task_id must not be empty"


def test_handle_and_fetch_bodies_parse_to_their_typed_requests() -> None:
    mint = parse_mint({"path": " a b ", "peer": " http://h:1 ", "ttl_secs": 30})
    assert isinstance(mint, HandleRequest) and (mint.path, mint.peer, mint.ttl_secs) == (" a b ", "http://h:1", 30)
    fetch = parse_fetch({"peer": "h:1 ", "handle": " mph1.x ", "etag": "a" * 64})
    assert isinstance(fetch, PeerFetchRequest) and (fetch.peer, fetch.handle, fetch.etag) == ("h:1", "mph1.x", "a" * 64)


@pytest.mark.parametrize(
    ("parse", "body"),
    [(parse_mint, {"path": "p", "peer": "", "ttl_secs": 1}), (parse_fetch, {"peer": "x"})],
    ids=["mint", "fetch"],
)
def test_a_bad_handle_or_fetch_body_is_an_invalid_request(
    parse: Callable[[dict[str, Any]], object], body: dict[str, Any]
) -> None:
    with pytest.raises(BadPeerRequest) as info:
        parse(body)
    assert (info.value.status, info.value.code) == (400, "invalid_request")


# -- POST /jobs (the TCP port's and the admin socket's) -------------------------------------------


def test_a_launch_parses_to_its_typed_request() -> None:
    req = parse_launch(
        {"name": "worker", "version": "0.1.0", "task": "go", "deadline_secs": 5, "untrusted": True, "workdir": "/a//b/"}
    )
    assert isinstance(req, LaunchRequest)
    assert req == LaunchRequest(
        name="worker",
        version="0.1.0",
        task={"objective": "go", "instructions": None, "context": None, "output_format": None},
        deadline_secs=5.0,
        untrusted=True,
        workdir="/a/b",
    )
    assert parse_launch({"name": "w", "version": "1"}) == LaunchRequest(name="w", version="1")


LAUNCH = {"name": "worker", "version": "0.1.0"}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, "invalid JSON: missing field 'name'"),
        # Unlike upstream's /spawn, a null coordinate reads as missing here.
        ({"name": None, "version": "1"}, "invalid JSON: missing field 'name'"),
        ({"name": "w", "version": None}, "invalid JSON: missing field 'version'"),
        ({"name": 3, "version": "1"}, "invalid JSON: field 'name' must be a string"),
        # Both coordinates' presence and type come before either one's grammar.
        ({"name": "a..b"}, "invalid JSON: missing field 'version'"),
        ({"name": "a..b", "version": "1"}, "name must not be '.' or contain '..'"),
        ({**LAUNCH, "deadline_secs": 0}, "deadline_secs must be a number of seconds above 0 and at most 604800"),
        ({**LAUNCH, "deadline_secs": True}, "deadline_secs must be a number of seconds above 0 and at most 604800"),
        ({**LAUNCH, "deadline_secs": 604801}, "deadline_secs must be a number of seconds above 0 and at most 604800"),
        ({**LAUNCH, "untrusted": 1}, "untrusted must be true or false"),
        ({**LAUNCH, "workdir": "rel"}, "workdir must be an absolute path"),
        (
            {**LAUNCH, "task": 5},
            "task must be a string or an object with objective, instructions, context, output_format",
        ),
        ({**LAUNCH, "task": {"objective": "x", "why": 1}}, "task has an unknown field 'why'"),
        ({**LAUNCH, "task": {"objective": "x", "context": 1}}, "task.context must be a string"),
        ({**LAUNCH, "task": {"context": "c"}}, "task.objective must be a non-empty string"),
        (
            {**LAUNCH, "deadline_secs": -1, "untrusted": 1, "workdir": "x"},
            "deadline_secs must be a number of seconds above 0 and at most 604800",
        ),
    ],
)
def test_launch_sentences(body: dict[str, Any], expected: str) -> None:
    assert sentence(parse_launch, body) == expected


@given(
    st.dictionaries(
        st.sampled_from(["name", "version", "task", "deadline_secs", "untrusted", "workdir", "x"]), json_values
    )
)
def test_a_launch_never_fails_other_than_with_a_sentence(body: dict[str, Any]) -> None:
    req = parsed_or_refused(parse_launch, body)
    if req is not None:
        assert isinstance(req.name, str) and isinstance(req.version, str) and isinstance(req.untrusted, bool)
        assert req.deadline_secs is None or 0 < req.deadline_secs <= MAX_DEADLINE_SECS
        assert req.workdir is None or req.workdir.startswith("/")


# -- the admin socket's own bodies -----------------------------------------------------------------


def test_admin_bodies() -> None:
    assert (
        parse_drain({}) is None and parse_drain({"timeout_secs": 0}) == 0 and parse_drain({"timeout_secs": 2.5}) == 2.5
    )
    for bad in (-1, True, "3"):
        assert sentence(parse_drain, {"timeout_secs": bad}) == "timeout_secs must be a number of seconds, zero or more"
    assert parse_end_reason({}) == "ended by the operator" and parse_end_reason({"reason": "why"}) == "why"
    for bad in ("", " ", None, 3, "x" * 501):
        assert sentence(parse_end_reason, {"reason": bad}) == (
            "reason must be a non-empty string of at most 500 characters"
        )

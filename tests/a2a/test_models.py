"""Models: both dialects parse, each serialiser emits exactly one dialect, strictness where murmur is strict."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from a2a.protocol.models import (
    Artifact,
    Message,
    Part,
    Task,
    TaskState,
    TaskStatus,
    agent_message,
    dump_message,
    dump_send_result,
    dump_task,
    parse_message,
    parse_message_lean,
    parse_send_result,
    parse_task,
)


@pytest.mark.parametrize(
    ("state", "v1"),
    [
        ("submitted", "TASK_STATE_SUBMITTED"),
        ("working", "TASK_STATE_WORKING"),
        ("input-required", "TASK_STATE_INPUT_REQUIRED"),
        ("completed", "TASK_STATE_COMPLETED"),
        ("canceled", "TASK_STATE_CANCELED"),
        ("failed", "TASK_STATE_FAILED"),
        ("rejected", "TASK_STATE_REJECTED"),
        ("auth-required", "TASK_STATE_AUTH_REQUIRED"),
        ("unknown", "TASK_STATE_UNSPECIFIED"),
    ],
)
def test_state_mapping(state: str, v1: str) -> None:
    s = TaskState(state)
    assert s.v1 == v1
    assert TaskState.parse(v1) is s and TaskState.parse(state) is s


def test_state_unknown_spellings_and_terminal() -> None:
    assert TaskState.parse("COMPLETED") is TaskState.UNKNOWN
    assert {s for s in TaskState if s.terminal} == {
        TaskState.COMPLETED,
        TaskState.CANCELED,
        TaskState.FAILED,
        TaskState.REJECTED,
    }


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ({"text": "a"}, "text"),
        ({"kind": "text", "text": "a"}, "text"),
        ({"file": {"uri": "file:///a", "mimeType": "text/plain", "name": "a"}}, "file"),
        ({"url": "file:///a", "mediaType": "text/plain", "filename": "a"}, "file"),
        ({"data": {"k": 1}}, "data"),
        ({"kind": "data", "data": [1, 2]}, "data"),
    ],
)
def test_part_kind_inferred(raw: dict[str, Any], kind: str) -> None:
    p = Part.model_validate(raw)
    assert p.kind == kind
    lean = parse_message_lean({"messageId": "m", "role": "user", "parts": [raw]}).parts[0]
    assert lean == p


def test_file_parts_map_across_dialects() -> None:
    p = Part.model_validate({"url": "file:///a", "mediaType": "text/plain", "filename": "a"})
    assert p.file is not None and (p.file.uri, p.file.mime_type, p.file.name) == ("file:///a", "text/plain", "a")
    m = Message(message_id="m", role="user", parts=[p])
    assert dump_message(m, "1.0")["parts"] == [{"url": "file:///a", "mediaType": "text/plain", "filename": "a"}]
    assert dump_message(m, "0.3")["parts"] == [
        {"kind": "file", "file": {"uri": "file:///a", "mimeType": "text/plain", "name": "a"}}
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"messageId": 1, "role": "user", "parts": []},
        {"messageId": "m", "role": "user", "parts": {"text": "a"}},
        {"messageId": "m", "role": "user", "parts": ["a"]},
        {"messageId": "m", "role": "user", "parts": [{"text": 1}]},
        {"messageId": "m", "role": "user", "parts": [{}]},
        {"messageId": "m", "role": "user", "parts": [{"kind": "text"}]},
        {"messageId": "m", "role": "user", "parts": [{"kind": "video", "video": 1}]},
    ],
)
def test_message_strictness(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse_message(bad)
    with pytest.raises(ValueError):
        parse_message_lean(bad)


def test_message_roles_and_text() -> None:
    m = parse_message({"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "a"}, {"data": 1}, {"text": "b"}]})
    assert m.role == "agent" and m.text == "a\nb"
    lean = parse_message_lean({"messageId": "m", "role": "ROLE_USER", "contextId": None, "parts": [{"text": "a"}]})
    assert lean.role == "user" and lean.context_id is None


def sample_task() -> Task:
    return Task(
        id="tsk_1",
        context_id="ctx_1",
        status=TaskStatus(state=TaskState.COMPLETED, message=agent_message("msg_tsk_1_status", "done")),
        artifacts=[Artifact(artifact_id="response", name="response", parts=[Part(kind="text", text="done")])],
    )


def test_dump_task_0_3() -> None:
    assert dump_task(sample_task(), "0.3") == {
        "kind": "task",
        "id": "tsk_1",
        "contextId": "ctx_1",
        "status": {
            "state": "completed",
            "message": {
                "kind": "message",
                "messageId": "msg_tsk_1_status",
                "role": "agent",
                "parts": [{"kind": "text", "text": "done"}],
            },
        },
        "artifacts": [{"artifactId": "response", "name": "response", "parts": [{"kind": "text", "text": "done"}]}],
    }
    assert dump_send_result(sample_task(), "0.3")["kind"] == "task"


def test_dump_task_1_0() -> None:
    body = dump_send_result(sample_task(), "1.0")
    assert list(body) == ["task"]
    assert body["task"] == {
        "id": "tsk_1",
        "contextId": "ctx_1",
        "status": {
            "state": "TASK_STATE_COMPLETED",
            "message": {"messageId": "msg_tsk_1_status", "role": "ROLE_AGENT", "parts": [{"text": "done"}]},
        },
        "artifacts": [{"artifactId": "response", "name": "response", "parts": [{"text": "done"}]}],
    }


@pytest.mark.parametrize("dialect", ["0.3", "1.0"])
def test_round_trip(dialect: str) -> None:
    t = sample_task()
    assert parse_task(dump_task(t, dialect)) == t  # type: ignore[arg-type]
    assert parse_send_result(dump_send_result(t, dialect)) == t  # type: ignore[arg-type]


def test_parse_send_result_shapes() -> None:
    era_b = {"id": "tsk_1", "contextId": "ctx", "status": {"state": "submitted"}}
    assert parse_send_result(era_b).status.state is TaskState.SUBMITTED
    msg = {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hi"}], "taskId": "t9", "contextId": "c"}
    for shape in ({"message": msg}, {**msg, "kind": "message"}, msg):
        task = parse_send_result(shape)
        assert (task.id, task.context_id, task.status.state) == ("t9", "c", TaskState.COMPLETED)
        assert task.status.message is not None and task.status.message.text == "hi"
    with pytest.raises(ValueError):
        parse_send_result([])
    with pytest.raises(ValidationError):
        parse_send_result({"id": 5, "status": {"state": "completed"}})


def test_artifact_without_id_gets_name() -> None:
    a = Artifact.model_validate({"name": "response", "parts": [{"text": "x"}]})
    assert a.artifact_id == "response"

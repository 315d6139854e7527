"""The door's strict Message parser: what each dialect's serialiser writes is read back; nothing else
raises anything but a ValueError; the other dialect's shapes are refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a.protocol.inbound import parse_message
from a2a.protocol.models import DIALECTS, Dialect, FileContent, Message, Part, build, dump_message

_text = st.text(max_size=20)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_text, kids, max_size=3),
    max_leaves=8,
)


def _part(kind: str, value: Any, media: str | None) -> Part:
    file = (
        build(FileContent, {"uri": value, "bytes": None, "mime_type": media, "name": None}) if kind == "file" else None
    )
    return build(
        Part,
        {
            "kind": kind,
            "text": value if kind == "text" else None,
            "file": file,
            "data": value if kind == "data" else None,
            "metadata": None,
        },
    )


_parts = st.one_of(
    st.builds(_part, st.just("text"), _text, st.none()),
    st.builds(_part, st.just("file"), st.text(min_size=1, max_size=20), st.none() | _text),
    st.builds(_part, st.just("data"), st.dictionaries(_text, _json, min_size=1, max_size=3), st.none()),
)
_messages = st.builds(
    lambda mid, role, parts, ctx, tid: build(
        Message,
        {"message_id": mid, "role": role, "parts": parts, "context_id": ctx, "task_id": tid, "metadata": None},
    ),
    st.text(min_size=1, max_size=20),
    st.sampled_from(["user", "agent"]),
    st.lists(_parts, min_size=1, max_size=4),
    st.none() | _text,
    st.none() | _text,
)


@given(_messages, st.sampled_from(DIALECTS))
def test_what_a_dialect_writes_it_reads(message: Message, dialect: Dialect) -> None:
    back = parse_message(dump_message(message, dialect), dialect)
    assert back.model_dump() == message.model_dump()


@given(_json, st.sampled_from(DIALECTS))
def test_anything_else_is_a_value_error_or_a_message(obj: object, dialect: Dialect) -> None:
    try:
        parse_message(obj, dialect)
    except ValueError as exc:
        assert str(exc)


@given(_messages)
def test_each_dialect_refuses_the_others_message(message: Message) -> None:
    for wrote, reads in (("1.0", "0.3"), ("0.3", "1.0")):
        with pytest.raises(ValueError, match=r"kind|role"):
            parse_message(dump_message(message, wrote), reads)  # type: ignore[arg-type]

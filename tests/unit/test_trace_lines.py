"""trace.jsonl envelope order, session-node parenting and token redaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.core.ids import token_id
from roost.observe.tracelines import TraceWriter, build_line, read_trace, redact, redact_text


def test_envelope_fields_come_first_in_order() -> None:
    eid, raw = build_line("a2a_send", "ses_1", "evt_parent", {"peer_url": "x", "trust": "trusted"})
    obj = json.loads(raw)
    assert list(obj)[:5] == ["event_type", "event_id", "parent_id", "session_id", "timestamp"]
    assert obj["event_id"] == eid and eid.startswith("evt_") and len(eid) == 36
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1


def test_foreign_writer_parents_to_session_start(tmp_path: Path) -> None:
    own = TraceWriter(tmp_path, "ses_1")
    node = own.write("session_start", {"capsule_name": "x"}, parent_id=None)
    foreign = TraceWriter(tmp_path, "ses_1")
    foreign.write("delegation_start", {"delegation_id": "dlg_1"})
    lines = read_trace(tmp_path / ".murmur" / "ses_1" / "trace.jsonl")
    assert lines[0]["parent_id"] is None
    assert lines[1]["parent_id"] == node


def test_no_session_start_means_null_parents(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path, "ses_2")
    w.write("a2a_send", {"peer_url": "p"})
    assert read_trace(w.path)[0]["parent_id"] is None


def test_tokens_are_redacted_everywhere() -> None:
    handle = "mh1.eyJ2IjoxfQ.AAAA_-bb"
    cred = "msc1.eyJ2IjoxfQ.CCCC"
    text = f"here {handle}. and {cred}"
    assert redact_text(text) == f"here <handle:{token_id(handle)}>. and <token:{token_id(cred)}>"
    assert redact({"a": [text, {"b": handle}], "n": 3}) == {
        "a": [redact_text(text), {"b": f"<handle:{token_id(handle)}>"}],
        "n": 3,
    }
    assert redact_text("the word mh1 alone") == "the word mh1 alone"


@pytest.mark.parametrize(
    "token",
    [
        "msa1.eyJ2IjoxfQ.DDDD",
        "mnk1.eyJuIjoiYSJ9.EEEE_-ff",  # a node keeper's token
        "mra1.job_0123456789abcdef0123456789abcdef.Gg-hh_ii",  # a remote top-level job's approval
    ],
)
def test_every_family_the_daemon_mints_is_redacted(token: str) -> None:
    assert redact_text(f"got {token} here") == f"got <token:{token_id(token)}> here"


def _redacted_slowly(value: object) -> object:
    """What :func:`redact` must return, written plainly: every string through ``redact_text``."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redacted_slowly(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted_slowly(v) for v in value]
    return value


_TOKENS = st.sampled_from(["mh1.eyJ2IjoxfQ.AAAA_-bb", "msc1.eyJ2IjoxfQ.CCCC", "msa1.x.y", "mnk1.a.b", "mra1.j.k"])
_JSON_LIKE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.builds(lambda a, t, b: f"{a}{t}{b}", st.text(max_size=8), _TOKENS, st.text(max_size=8))
    | st.sampled_from(["http://127.0.0.1:8080", "v1.2", "1."]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@given(_JSON_LIKE)
def test_redact_is_redact_text_on_every_string_and_leaves_the_rest(value: object) -> None:
    assert redact(value) == _redacted_slowly(value)


@given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1), st.text())
def test_no_handle_survives_redaction(segment: str, noise: str) -> None:
    token = f"mh1.{segment}.{segment}"
    out = redact_text(noise + " " + token + " " + noise)
    assert token not in out

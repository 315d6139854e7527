"""trace.jsonl envelope order, session-node parenting and token redaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.ids import token_id
from roost.trace import TraceWriter, build_line, read_trace, redact, redact_text


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


@given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1), st.text())
def test_no_handle_survives_redaction(segment: str, noise: str) -> None:
    token = f"mh1.{segment}.{segment}"
    out = redact_text(noise + " " + token + " " + noise)
    assert token not in out

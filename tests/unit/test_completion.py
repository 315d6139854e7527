"""completion.json records and the MURMUR_SPAWNER handle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.services.completionfile import (
    CompletionRecord,
    SpawnerHandle,
    SpawnerHandleError,
    crash_detail,
    cut_detail,
    message_text,
    read_completion,
    write_completion,
)


def _rec(**kw: object) -> CompletionRecord:
    base: dict[str, object] = dict(
        delegation_id="dlg_1",
        capsule_name="worker",
        capsule_version="0.1.0",
        session_id="ses_c",
        status="ok",
        workdir="/w/child",
        duration_ms=12,
        reported_by="child",
    )
    base.update(kw)
    return CompletionRecord(**base)  # type: ignore[arg-type]


def test_record_omits_absent_optionals_and_round_trips(tmp_path: Path) -> None:
    rec = _rec()
    obj = rec.to_dict()
    assert "result_path" not in obj and "detail" not in obj and "delivery_error" not in obj
    assert list(obj) == [
        "delegation_id",
        "capsule_name",
        "capsule_version",
        "session_id",
        "status",
        "workdir",
        "duration_ms",
        "reported_by",
        "delivered",
    ]
    path = write_completion(tmp_path, _rec(result_path="out/result.txt", delivered=True))
    text = path.read_text()
    assert text.endswith("\n") and text.startswith("{\n  ")
    back = read_completion(tmp_path)
    assert back is not None and back.result_path == "out/result.txt" and back.delivered
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in tmp_path.iterdir()] == ["completion.json"]  # no temp file left


def test_unreadable_record_reads_as_none(tmp_path: Path) -> None:
    assert read_completion(tmp_path) is None
    (tmp_path / "completion.json").write_text("{broken")
    assert read_completion(tmp_path) is None
    (tmp_path / "completion.json").write_text(json.dumps({"status": "ok"}))
    assert read_completion(tmp_path) is None


@given(st.text(max_size=3000))
def test_cut_detail_is_bounded_and_marked(text: str) -> None:
    out = cut_detail(text)
    assert len(out.encode()) <= 2000
    if len(text.encode()) > 2000:
        assert out.endswith(" […]")
    else:
        assert out == text


def test_crash_detail_names_status_and_last_20_lines() -> None:
    lines = [f"line {i}" for i in range(30)]
    detail = crash_detail("exit status 3", lines)
    assert detail.startswith("the child process ended without recording a completion (exit status 3)")
    assert "; its last stderr lines were:\nline 10\n" in detail
    assert "line 9\n" not in detail
    assert crash_detail("signal 9", []) == "the child process ended without recording a completion (signal 9)"


def test_message_text_never_carries_output() -> None:
    text = message_text(_rec(status="crashed", detail="boom"))
    assert text.splitlines()[0] == "Delegated capsule finished."
    assert "result: none (the child wrote no result file)" in text
    assert "detail: boom" in text
    assert "result: out/result.txt (in that workdir)" in message_text(_rec(result_path="out/result.txt"))


def test_spawner_handle_round_trip_and_refusals() -> None:
    h = SpawnerHandle(
        session_id="ses_p", context_id="ctx_1", delegation_id="dlg_1", url="http://127.0.0.1:1", trust="trusted"
    )
    assert SpawnerHandle.parse(h.to_env()) == h
    lineage = SpawnerHandle(session_id="ses_p", context_id="ctx_1", delegation_id="dlg_1")
    assert not SpawnerHandle.parse(lineage.to_env()).addressed
    addr = '{"session_id":"s","context_id":"c","delegation_id":"d","url":"http://x:1"'
    cases = {
        "nope": "it is not JSON",
        "[]": "it is not a JSON object",
        '{"context_id":"c","delegation_id":"d"}': "it carries no 'session_id'",
        addr + "}": "it carries a 'url' with no 'trust'",
        addr + ',"trust":"maybe"}': "'maybe' is not a trust class",
    }
    for raw, reason in cases.items():
        with pytest.raises(SpawnerHandleError) as err:
            SpawnerHandle.parse(raw)
        assert str(err.value).startswith(reason)

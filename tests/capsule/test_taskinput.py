"""The task fallback chain and the result envelope, without processes."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from roost.capsule.taskinput import format_request, read_initial_task, read_job_id, write_results


def _request(payload: dict[str, object]) -> bytes:
    return json.dumps(
        {"schema": "murmur.message.v1", "type": "murmur.code_task.request.v1", "job_id": None, "payload": payload}
    ).encode()


def test_format_request_blocks() -> None:
    raw = _request({"objective": "Build", "instructions": "Only code", "context": "ctx", "output_format": None})
    assert format_request(raw) == "Objective: Build\n\nInstructions: Only code\n\nContext: ctx"
    assert format_request(_request({"objective": "Build", "instructions": None})) == "Build"
    assert format_request(_request({"objective": "Build", "context": "ctx"})) == "Objective: Build\n\nContext: ctx"


@given(st.text(max_size=80))
def test_objective_alone_is_the_text_typed(text: str) -> None:
    assert format_request(_request({"objective": text, "instructions": None, "context": None})) == text


def test_format_request_refuses_other_shapes() -> None:
    assert format_request(b"{nope") is None
    assert format_request(b"[]") is None
    assert format_request(_request({"instructions": "x"})) is None
    assert format_request(json.dumps({"schema": "other", "payload": {"objective": "x"}}).encode()) is None


@given(st.binary(max_size=200))
def test_format_request_never_raises(raw: bytes) -> None:
    out = format_request(raw)
    assert out is None or isinstance(out, str)


def test_chain_order(tmp_path: Path) -> None:
    assert read_initial_task(tmp_path) is None
    (tmp_path / "input.txt").write_text("from txt")
    assert read_initial_task(tmp_path) is not None and read_initial_task(tmp_path).source_file == "input.txt"  # type: ignore[union-attr]
    (tmp_path / "task.md").write_text("from md")
    t = read_initial_task(tmp_path)
    assert t is not None and (t.text, t.source_file) == ("from md", "task.md")
    (tmp_path / "input.json").write_text("not json")  # unparseable: falls through
    t = read_initial_task(tmp_path)
    assert t is not None and t.source_file == "task.md"
    (tmp_path / "input.json").write_bytes(_request({"objective": "from json"}))
    t = read_initial_task(tmp_path)
    assert t is not None and (t.text, t.source_file) == ("from json", "input.json")


def test_job_id_sources(tmp_path: Path) -> None:
    assert read_job_id(tmp_path, {}) is None
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "job_id.txt").write_text("job_file\n")
    assert read_job_id(tmp_path, {}) == "job_file"
    assert read_job_id(tmp_path, {"MURMUR_JOB_ID": "job_env"}) == "job_env"


def test_results_written_on_success_only(tmp_path: Path) -> None:
    write_results(tmp_path, "done\n", ok=True, job_id="job_1")
    env = json.loads((tmp_path / "out" / "result.json").read_text())
    assert env == {
        "schema": "murmur.message.v1",
        "type": "murmur.code_task.result.v1",
        "job_id": "job_1",
        "payload": {"status": None, "summary": None, "files": None, "output": "done\n"},
    }
    write_results(tmp_path, "broke\n", ok=False, job_id="job_1")
    assert (tmp_path / "out" / "result.txt").read_text() == "broke\n"
    assert not (tmp_path / "out" / "result.json").exists()

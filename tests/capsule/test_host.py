"""``roost-capsule run`` as a real process: door, registration, tasks, results, refusals."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from a2a.client import A2AClient
from a2a.protocol import seal
from a2a.protocol.models import Message, Part, TaskState
from roost.capsule.probe import probe_host
from tests.support.capsules import Capsules, add_examples, base_env
from tests.support.registry import RegistryBuilder
from tests.trace_checks import assert_trace_guarantees

ENV_DUMP = """
import json, os, stat, sys
text = sys.stdin.read()
sock = os.environ["MURMUR_HOST_SOCKET"]
print(json.dumps({
    "text": text,
    "env": {k: v for k, v in os.environ.items() if k.startswith("MURMUR_")},
    "path0": os.environ["PATH"].split(os.pathsep)[0],
    "sock_mode": stat.S_IMODE(os.stat(sock).st_mode),
    "dir_mode": stat.S_IMODE(os.stat(os.path.dirname(sock)).st_mode),
    "cwd": os.getcwd(),
    "pgid_is_own": os.getpgid(0) == os.getpid(),
}))
"""


async def _poll(client: A2AClient, url: str, task_id: str, dialect: Any) -> Any:
    for _ in range(200):
        task = await client.get_task(url, task_id, dialect=dialect)
        if task.status.state.terminal:
            return task
        await asyncio.sleep(0.05)
    raise AssertionError("task did not finish")


async def test_top_level_echo_answers_both_dialects(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    add_examples(registry, "echo")
    d = await daemon_factory(registry.root, spawn_allow=("echo",))
    work = tmp_path / "w"
    cp = await capsules.start("echo@0.1.0", work, registry=registry.root, env=base_env(MURMUR_ROOST_URL=d.url))
    assert cp.session_id.startswith("ses_") and cp.url.startswith("http://127.0.0.1:")
    rec = d.roost.table.get(cp.session_id)
    assert rec is not None and rec.running and rec.trust == "trusted"
    assert rec.capsule_url == cp.url and rec.workdir == str(work) and rec.pid == cp.proc.pid
    async with A2AClient() as client:
        for dialect in ("0.3", "1.0"):
            msg = Message(message_id=f"m-{dialect}", role="user", parts=[Part(kind="text", text=f"hi {dialect}")])
            sent = await client.send_message(cp.url, msg, dialect=dialect)
            assert sent.status.state == TaskState.SUBMITTED
            done = await _poll(client, cp.url, sent.id, dialect)
            assert done.status.state == TaskState.COMPLETED
            assert done.artifacts[0].parts[0].text == f"echo: hi {dialect}\n"
    assert await cp.terminate() == 143
    assert d.roost.table.get(cp.session_id).status == "failed"
    recs = assert_trace_guarantees(cp.trace)
    start = recs[0]
    assert start["capsule_name"] == "echo" and start["containment_achieved"] == probe_host().offered
    assert "spawned_by" not in start and "delegation_id" not in start
    received = [r for r in recs if r["event_type"] == "a2a_task_received"]
    assert [r["message_id"] for r in received] == ["m-0.3", "m-1.0"]
    assert all(r["traceparent_from_caller"] is None for r in received)
    tasks = [r for r in recs if r["event_type"] == "task_start"]
    assert {(t["source"], t["origin"], t["trust"], t["lane"]) for t in tasks} == {("a2a", "event", "untrusted", "bg")}
    assert recs[-1]["exit_status"] == "ok"
    assert (work / "out" / "result.txt").read_text() == "echo: hi 1.0\n"


@pytest.mark.parametrize(
    ("files", "expected", "source"),
    [
        (
            {"input.json": "REQUEST", "task.md": "md task", "input.txt": "txt task"},
            "Objective: build it\n\nInstructions: carefully",
            "input.json",
        ),
        ({"input.json": "{broken", "task.md": "md task", "input.txt": "txt task"}, "md task", "task.md"),
        ({"input.txt": "txt task"}, "txt task", "input.txt"),
    ],
)
async def test_task_chain_env_and_results(
    registry: RegistryBuilder,
    capsules: Capsules,
    tmp_path: Path,
    files: dict[str, str],
    expected: str,
    source: str,
) -> None:
    registry.add("envdump", script=ENV_DUMP)
    work = tmp_path / "w"
    (work / "meta").mkdir(parents=True)
    (work / "meta" / "job_id.txt").write_text("job_" + "a" * 32 + "\n")
    request = {
        "schema": "murmur.message.v1",
        "type": "murmur.code_task.request.v1",
        "job_id": None,
        "payload": {"objective": "build it", "instructions": "carefully", "context": None, "output_format": None},
    }
    for name, text in files.items():
        (work / name).write_text(json.dumps(request) if text == "REQUEST" else text)
    cp = await capsules.start("envdump@0.1.0", work, registry=registry.root)
    assert await cp.wait() == 0, cp.stderr
    out = json.loads((work / "out" / "result.txt").read_text())
    assert out["text"] == expected
    env = out["env"]
    assert env["MURMUR_JOB_ID"] == "job_" + "a" * 32
    assert env["MURMUR_SESSION_ID"] == cp.session_id
    assert "MURMUR_SPAWNER_LIFELINE" not in env and "MURMUR_ROOST_URL" not in env
    assert not any("msc1." in v or "msa1." in v for v in env.values())
    assert out["sock_mode"] == 0o600 and out["dir_mode"] == 0o700
    assert out["cwd"] == str(work) and out["pgid_is_own"]
    import sys

    assert out["path0"] == str(Path(sys.executable).parent)
    result = json.loads((work / "out" / "result.json").read_text())
    assert result["type"] == "murmur.code_task.result.v1" and result["job_id"] == "job_" + "a" * 32
    assert json.loads(result["payload"]["output"]) == out
    recs = assert_trace_guarantees(cp.trace)
    task = next(r for r in recs if r["event_type"] == "task_start")
    assert (task["source"], task["origin"], task["trust"], task["lane"]) == ("task_md", "user", "trusted", "user")
    assert task["message_parts_bytes"] == len(expected.encode())
    assert not await asyncio.to_thread(Path(env["MURMUR_HOST_SOCKET"]).exists)  # removed at exit


async def test_no_task_ends_at_once(registry: RegistryBuilder, capsules: Capsules, tmp_path: Path) -> None:
    add_examples(registry, "worker")
    cp = await capsules.start("worker@0.1.0", tmp_path / "w", registry=registry.root)
    assert await cp.wait() == 0
    recs = assert_trace_guarantees(cp.trace)
    assert [r["event_type"] for r in recs] == ["session_start", "session_end"]
    assert not (tmp_path / "w" / "out").exists()


async def test_failed_task_writes_result_txt_only(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    add_examples(registry, "crasher")
    work = tmp_path / "w"
    work.mkdir()
    (work / "task.md").write_text("boom")
    cp = await capsules.start("crasher@0.1.0", work, registry=registry.root)
    assert await cp.wait() == 3  # the host exits with its entrypoint's own status
    text = (work / "out" / "result.txt").read_text()
    assert "exited with status 3" in text and "crasher: about to fail" in text
    assert not (work / "out" / "result.json").exists()
    recs = assert_trace_guarantees(cp.trace)
    assert [r["exit_status"] for r in recs if r["event_type"] in ("task_end", "session_end")] == ["failed", "failed"]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("{not json", "it is not JSON: "),
        (
            '{"session_id":"ses_a","context_id":"c","delegation_id":"dlg_x","url":"http://127.0.0.1:9"}',
            "it carries a 'url' with no 'trust'; a completion address is both or neither",
        ),
        ('{"session_id":"ses_a","context_id":"c"}', "it carries no 'delegation_id'"),
    ],
)
async def test_broken_spawner_refuses(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, value: str, reason: str
) -> None:
    add_examples(registry, "worker")
    cp = await capsules.start(
        "worker@0.1.0", tmp_path / "w", registry=registry.root, env=base_env(MURMUR_SPAWNER=value), expect_ready=False
    )
    assert await cp.wait() == 1
    assert len(cp.stderr) == 1, cp.stderr
    line = cp.stderr[0]
    assert line.startswith("roost-capsule: MURMUR_SPAWNER does not carry a readable spawner handle: " + reason)
    assert line.endswith("so the launch is refused rather than run unreportable")
    assert cp.proc.stdout is not None and not cp.stdout_rest
    assert not (tmp_path / "w" / ".murmur").exists()


async def test_manifest_without_entrypoint_refused(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    registry.add("bare")
    cp = await capsules.start("bare@0.1.0", tmp_path / "w", registry=registry.root, expect_ready=False)
    assert await cp.wait() == 1
    assert cp.stderr == [
        "roost-capsule: bare@0.1.0 declares no entrypoint, so roost-capsule cannot run it; a capsule without "
        "one runs under its own runtime (mur run)"
    ]


async def test_registration_refusals(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    registry.add("spawny", capabilities={"spawn": {"allow": ["spawny"]}}, script="print('x')")
    cp = await capsules.start("spawny@0.1.0", tmp_path / "a", registry=registry.root, expect_ready=False)
    assert await cp.wait() == 1
    assert cp.stderr[-1].startswith(
        "roost-capsule: failed to register this session with mur-roost at <unset>: MURMUR_ROOST_URL is not set; "
        "a capsule declaring capabilities.spawn.allow"
    )
    d = await daemon_factory(registry.root, spawn_allow=("other",))
    cp = await capsules.start(
        "spawny@0.1.0",
        tmp_path / "b",
        registry=registry.root,
        env=base_env(MURMUR_ROOST_URL=d.url),
        expect_ready=False,
    )
    assert await cp.wait() == 1
    assert cp.stderr[-1] == (
        f"roost-capsule: failed to register this session with mur-roost at {d.url}: 403 capsule 'spawny' is not "
        "in --spawn-allow; a capsule declaring capabilities.spawn.allow must be known to the daemon that referees "
        "its spawns, so the launch is refused rather than run unrefereed"
    )
    traces = list((tmp_path / "b" / ".murmur").glob("*/trace.jsonl"))
    assert len(traces) == 1 and traces[0].read_text() == ""  # refused before session_start
    # A bogus approval is refused the same way and the token never reaches stderr.
    cp = await capsules.start(
        "spawny@0.1.0",
        tmp_path / "c",
        registry=registry.root,
        env=base_env(MURMUR_ROOST_URL=d.url),
        stdin_line="msa1.AAAA.BBBB",
        expect_ready=False,
    )
    assert await cp.wait() == 1
    assert "failed to register" in cp.stderr[-1] and "msa1." not in "\n".join(cp.stderr)


async def test_completion_task_is_recorded_not_run(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    """A delegation's outcome arriving at the door never re-runs the entrypoint on its text."""
    add_examples(registry, "echo")
    d = await daemon_factory(registry.root, spawn_allow=("echo",))
    work = tmp_path / "w"
    cp = await capsules.start("echo@0.1.0", work, registry=registry.root, env=base_env(MURMUR_ROOST_URL=d.url))
    headers = {
        "x-murmur-task-origin": "completion",
        "x-murmur-task-trust": "trusted",
        "x-murmur-delegation-id": "dlg_0123",
        "x-murmur-completion-session": cp.session_id,
    }
    msg = Message(message_id="m-c", role="user", parts=[Part(kind="text", text="Delegated capsule finished.")])
    key, sender = d.roost.key_holder.door_key_for(cp.session_id), "ses_" + "c" * 32

    def sealed(subject: str) -> dict[str, str]:  # as the daemon's launcher seals a completion it delivers
        stamp = seal.seal(
            key,
            sender=sender,
            receiver=cp.session_id,
            origin="completion",
            trust="trusted",
            traceparent="",
            subject=subject,
        )
        return {**headers, seal.SEAL_HEADER: stamp}

    async with A2AClient() as client:
        sent = await client.send_message(cp.url, msg, dialect="0.3", headers=sealed(seal.send_subject(msg, "dlg_0123")))
        for _ in range(200):  # the sender's own task: read under a seal over its id
            done = await client.get_task(cp.url, sent.id, dialect="0.3", headers=sealed(sent.id))
            if done.status.state.terminal:
                break
            await asyncio.sleep(0.05)
    assert done.status.state == TaskState.COMPLETED
    assert await cp.terminate() == 143
    assert not (work / "out" / "result.txt").exists()  # the entrypoint never ran
    recs = assert_trace_guarantees(cp.trace)
    (start,) = [r for r in recs if r["event_type"] == "task_start"]
    # Sealed, the door believes the stamp (unsealed it would be an event: tests/trust).
    assert (start["origin"], start["trust"], start["lane"], start["delegation_id"]) == (
        "completion",
        "trusted",
        "bg",
        "dlg_0123",
    )

"""The relay between two real ``roost-capsule`` sessions, end to end through the host socket.

The sender's entrypoint runs ``roost-capsule send`` (its host adds the credential and the
running task's traceparent); the receiver is the echo example. Both traces must satisfy the
seed guarantees and join: the receiver's ``traceparent_from_caller`` is the sender's
``a2a_send.traceparent``, so they share a trace id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.capsule.test_door_conformance import ASKER
from tests.support.capsules import Capsules, add_examples, base_env, capsules, trace_events, wait_for
from tests.support.registry import RegistryBuilder
from tests.trace_checks import assert_trace_guarantees

__all__ = ["capsules"]  # the fixture, re-exported for this module

SENDER = """
import subprocess, sys
peer = sys.stdin.read().strip()
proc = subprocess.run(["roost-capsule", "send", "--peer", peer, "hello from sender"], capture_output=True, text=True)
sys.stderr.write(proc.stderr)
sys.stdout.write(proc.stdout)
sys.exit(proc.returncode)
"""


async def _receiver(d: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path) -> Any:
    return await capsules.start(
        "echo@0.1.0", tmp_path / "recv", registry=registry.root, env=base_env(MURMUR_ROOST_URL=d.url)
    )


async def _send_between(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, name: str, script: str
) -> tuple[Any, Any, Path]:
    """An echo receiver and a sender capsule ``name`` whose task is the receiver's URL, run to its end."""
    add_examples(registry, "echo")
    registry.add(name, capabilities={"network": {"allow": ["127.0.0.1"]}}, script=script)
    d = await daemon_factory(registry.root, spawn_allow=("echo", name))
    recv = await _receiver(d, registry, capsules, tmp_path)
    work = tmp_path / "send"
    work.mkdir()
    (work / "task.md").write_text(recv.url)
    sender = await capsules.start(f"{name}@0.1.0", work, registry=registry.root, env=base_env(MURMUR_ROOST_URL=d.url))
    assert await sender.wait() == 0, sender.stderr
    return recv, sender, work


async def test_relay_between_two_capsules(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    recv, sender, work = await _send_between(daemon_factory, registry, capsules, tmp_path, "sender", SENDER)
    answer = json.loads((work / "out" / "result.txt").read_text())
    assert answer["trust"] == "trusted" and answer["state"] == "submitted"
    await wait_for(lambda: any(r["event_type"] == "task_end" for r in trace_events(recv.trace)))
    assert await recv.terminate() == 143

    s_recs = assert_trace_guarantees(sender.trace)
    sends = [r for r in s_recs if r["event_type"] == "a2a_send"]
    assert len(sends) == 1
    send = sends[0]
    assert [r["event_type"] for r in s_recs].index("a2a_send") < [r["event_type"] for r in s_recs].index("task_end")
    assert (send["peer_url"], send["task_id"], send["trust"]) == (recv.url, answer["task_id"], "trusted")

    r_recs = assert_trace_guarantees(recv.trace)
    got = next(r for r in r_recs if r["event_type"] == "a2a_task_received")
    start = next(r for r in r_recs if r["event_type"] == "task_start")
    assert got["task_id"] == send["task_id"] and got["message_id"] == send["message_id"]
    assert got["context_id"] == send["context_id"]
    assert got["traceparent_from_caller"] == send["traceparent"]
    assert got["traceparent_from_caller"].split("-")[1] == send["traceparent"].split("-")[1]
    assert (start["origin"], start["trust"], start["lane"], start["source"]) == ("peer", "trusted", "peer", "a2a")
    assert (tmp_path / "recv" / "out" / "result.txt").read_text() == "echo: hello from sender\n"


async def test_untrusted_session_cannot_raise_trust_at_a_capsule(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    add_examples(registry, "echo")
    registry.add("boss", capabilities={"network": {"allow": ["127.0.0.1"]}, "spawn": {"allow": ["minion"]}})
    registry.add("minion", capabilities={"network": {"allow": ["127.0.0.1"]}})
    d = await daemon_factory(registry.root, spawn_allow=("echo", "boss"))
    recv = await _receiver(d, registry, capsules, tmp_path)
    _, boss = await d.register_top("boss")
    grant = await d.roost.referee.spawn(boss, "minion", "0.1.0", untrusted=True)
    _, minion = await d.register_child(grant.approval, "minion")
    status, body, _, _ = await d.call(
        "POST",
        "/a2a/send",
        json={"peer_url": recv.url, "text": "raise me", "trust": "trusted", "origin": "user"},
        headers={
            "x-murmur-spawn-credential": minion,
            "x-murmur-task-trust": "trusted",
            "x-murmur-task-origin": "user",
        },
    )
    assert status == 200 and body["trust"] == "untrusted"
    await wait_for(lambda: any(r["event_type"] == "task_end" for r in trace_events(recv.trace)))
    assert await recv.terminate() == 143
    recs = assert_trace_guarantees(recv.trace)
    start = next(r for r in recs if r["event_type"] == "task_start")
    assert (start["origin"], start["trust"], start["lane"]) == ("peer", "untrusted", "peer")


CONTINUER = """
import json, subprocess, sys, time
peer = sys.stdin.read().strip()


def cli(*args):
    proc = subprocess.run(["roost-capsule", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        sys.exit(proc.returncode)
    return json.loads(proc.stdout)


def until(task_id, state):
    for _ in range(600):
        got = cli("get", "--peer", peer, task_id)
        if got["state"] == state:
            return got
        time.sleep(0.05)
    sys.exit(f"task {task_id} never became {state}: {got}")


first = cli("send", "--peer", peer, "Hello")
asked = until(first["task_id"], "input-required")
again = cli("send", "--peer", peer, "--task-id", first["task_id"], "--context-id", first["context_id"], "world")
done = until(first["task_id"], "completed")
print(json.dumps({"first": first, "asked": asked, "again": again, "done": done}))
"""


async def test_a_capsule_continues_a_task_that_asks_for_input(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    """Capsule A sends through the relay to capsule B, whose script asks for input; A reads the
    question with ``roost-capsule get`` and answers with ``send --task-id``; B's task completes."""
    registry.add("asker", script=ASKER, extra={"lifecycle": {"after_task": "sleep"}})
    registry.add("continuer", capabilities={"network": {"allow": ["127.0.0.1"]}}, script=CONTINUER)
    registry.add("intruder", capabilities={"network": {"allow": ["127.0.0.1"]}})
    d = await daemon_factory(registry.root, spawn_allow=("asker", "continuer", "intruder"))
    recv = await capsules.start(
        "asker@0.1.0", tmp_path / "recv", registry=registry.root, env=base_env(MURMUR_ROOST_URL=d.url)
    )
    work = tmp_path / "send"
    work.mkdir()
    (work / "task.md").write_text(recv.url)
    sender = await capsules.start("continuer@0.1.0", work, registry=registry.root, env=base_env(MURMUR_ROOST_URL=d.url))
    assert await sender.wait() == 0, sender.stderr
    got = json.loads((work / "out" / "result.txt").read_text())
    first, asked, again, done = got["first"], got["asked"], got["again"], got["done"]
    assert (first["trust"], first["state"]) == ("trusted", "submitted")
    assert asked["status_text"] == "Whom should I greet?"
    assert again["task_id"] == first["task_id"] and again["context_id"] == first["context_id"]
    assert done["artifacts"] == [{"name": "response", "text": "Hello, world!\n"}]

    # Only the session that created the task may continue it: another session's message naming
    # it finds no such task (-32001).
    _, intruder = await d.register_top("intruder")
    body = {"peer_url": recv.url, "text": "hijack", "task_id": first["task_id"]}
    status, err, _, _ = await d.call("POST", "/a2a/send", json=body, headers={"x-murmur-spawn-credential": intruder})
    assert status == 502 and "-32001" in err["error"], err
    assert await recv.terminate() == 143

    s_recs = assert_trace_guarantees(sender.trace)
    sends = [r for r in s_recs if r["event_type"] == "a2a_send"]
    assert [(s["task_id"], s["trust"]) for s in sends] == [(first["task_id"], "trusted")] * 2
    assert sends[0]["message_id"] != sends[1]["message_id"]
    r_recs = assert_trace_guarantees(recv.trace)
    assert [r["event_type"] for r in r_recs].count("task_start") == 1
    ends = [r for r in r_recs if r["event_type"] == "task_end"]
    assert [e["exit_status"] for e in ends] == ["ok"]
    start = next(r for r in r_recs if r["event_type"] == "task_start")
    assert (start["origin"], start["trust"]) == ("peer", "trusted")


STREAM_SENDER = """
import subprocess, sys
peer = sys.stdin.read().strip()
proc = subprocess.run(
    ["roost-capsule", "send", "--stream", "--peer", peer, "hello streamed"], capture_output=True, text=True
)
sys.stderr.write(proc.stderr)
sys.stdout.write(proc.stdout)
sys.exit(proc.returncode)
"""


async def test_streamed_send_between_two_capsules(
    daemon_factory: Any, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    """``roost-capsule send --stream`` through the host socket and the relay: the peer's Task (the
    relay's usual answer, ``a2a_send`` written once), then its updates, as JSON lines."""
    recv, sender, work = await _send_between(daemon_factory, registry, capsules, tmp_path, "streamer", STREAM_SENDER)
    events = [json.loads(line) for line in (work / "out" / "result.txt").read_text().splitlines()]
    first = events[0]
    assert first["kind"] == "task" and first["trust"] == "trusted" and first["state"] in ("submitted", "working")
    texts = "".join(e["text"] for e in events if e["kind"] == "artifact")
    assert texts == "echo: hello streamed\n"
    last = events[-1]
    assert last["kind"] == "status" and last["state"] == "completed" and last["final"] is True
    await wait_for(lambda: any(r["event_type"] == "task_end" for r in trace_events(recv.trace)))
    assert await recv.terminate() == 143
    sends = [r for r in assert_trace_guarantees(sender.trace) if r["event_type"] == "a2a_send"]
    assert len(sends) == 1 and sends[0]["task_id"] == first["task_id"]
    got = next(r for r in assert_trace_guarantees(recv.trace) if r["event_type"] == "task_start")
    assert (got["origin"], got["trust"]) == ("peer", "trusted")  # sealed and stamped as a plain send

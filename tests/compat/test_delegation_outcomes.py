"""Seed 000's ``delegation`` outcome vocabularies, at a real daemon with real children (an
external runtime, ``runtime_double.py``) delegated by a registered parent with a real door.

The sub-capsule's vocabulary, as the seed's table has it::

    | `"terminated"` | The parent ended the delegation — by hand, or at
    [`lifecycle.delegation_deadline_secs`](/reference/manifest.md#lifecycle-delegation-deadline-secs) |
    | `"unknown"` | A completion arrived, and the parent found no readable `completion.json`
    behind it. The parent's own word, and reachable on no other path |

and the delegating call's, whose ``timed_out`` is not a delegated child's word::

    | `"timed_out"` | `capsule` step only | The child had not answered within
    [`lifecycle.delegation_deadline_secs`](...) and was stopped |

The cancel case (seed 002, "When the task is cancelled")::

    2. Its records directory gets a completion.json with status: terminated, reported_by:
    launcher and the detail the parent ended this delegation, once it has exited.
    ...
    4. The parent's trace then writes the delegation's terminal delegation line, with outcome:
    terminated and reason: the delegating task was cancelled, followed by task_end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roost.observe.tracelines import read_trace, trace_path
from tests.support.daemon import RunningDaemon
from tests.support.launcher import RUNTIME, add_doubles, job_final, parent_door
from tests.support.registry import RegistryBuilder

__all__ = ["parent_door"]

CRED = "x-murmur-spawn-credential"


async def _daemon(daemon_factory: Any, registry: RegistryBuilder) -> RunningDaemon:
    add_doubles(registry)
    d: RunningDaemon = await daemon_factory(
        registry.root, spawn_allow=("boss",), runtime_command=RUNTIME, stop_grace_secs=1.0, launch_timeout_secs=15.0
    )
    d.roost.launcher.delivery_window_secs = 0.5
    return d


async def _delegated(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, parent_door: Any, task: str, **extra: Any
) -> tuple[RunningDaemon, Any, str, str, Path, dict[str, Any]]:
    """A daemon, a parent registered with a real door, and one child it delegated ``task`` to:
    ``(daemon, door, parent session, its credential, its workdir, the child's job)``."""
    d = await _daemon(daemon_factory, registry)
    door = await parent_door("x")
    wd = tmp_path / "boss-wd"
    wd.mkdir()
    sid, cred = await d.register_top("boss", workdir=str(wd), capsule_url=door.url)
    status, job, _, _ = await d.call(
        "POST", "/jobs", json={"name": "kid", "version": "0.1.0", "task": task, **extra}, headers={CRED: cred}
    )
    assert status == 201, job
    return d, door, sid, cred, wd, dict(job)


def _delegation_lines(wd: Path, sid: str) -> list[dict[str, Any]]:
    return [ln for ln in read_trace(trace_path(wd, sid)) if ln["event_type"] == "delegation"]


async def test_a_child_stopped_at_its_deadline_is_terminated_not_timed_out(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, parent_door: Any
) -> None:
    d, _, sid, cred, wd, job = await _delegated(
        daemon_factory, registry, tmp_path, parent_door, "sleep 60", deadline_secs=0.5
    )
    final = await job_final(d, job["job_id"], {CRED: cred})
    assert (final["state"], final["outcome"]) == ("terminated", "terminated")
    (line,) = _delegation_lines(wd, sid)
    assert line["outcome"] == "terminated"
    assert line["reason"] == final["completion"]["detail"]
    assert "delegation deadline" in line["reason"]


async def test_a_parent_cancel_reads_the_delegating_task_was_cancelled(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, parent_door: Any
) -> None:
    d, _, sid, cred, wd, job = await _delegated(daemon_factory, registry, tmp_path, parent_door, "sleep 60")
    status, _, _, _ = await d.call("POST", f"/jobs/{job['job_id']}/cancel", headers={CRED: cred})
    assert status == 200
    final = await job_final(d, job["job_id"], {CRED: cred})
    comp = json.loads((Path(final["workdir"]) / "completion.json").read_text())
    assert (comp["status"], comp["reported_by"], comp["detail"]) == (
        "terminated",
        "launcher",
        "the parent ended this delegation",
    )
    (line,) = _delegation_lines(wd, sid)
    assert (line["outcome"], line["reason"]) == ("terminated", "the delegating task was cancelled")


async def test_a_finished_child_with_no_readable_record_is_unknown(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, parent_door: Any
) -> None:
    d, door, sid, cred, wd, job = await _delegated(daemon_factory, registry, tmp_path, parent_door, "sleep 0 garbled")
    final = await job_final(d, job["job_id"], {CRED: cred})
    assert final["outcome"] == "unknown", final
    (line,) = _delegation_lines(wd, sid)
    assert line["outcome"] == "unknown"
    assert line["reason"] == "the child ended its session, but no readable completion.json was found behind it"
    # The parent is told (posted), in the record's own vocabulary, which has no 'unknown'.
    assert door.posts >= 1
    comp = json.loads((Path(final["workdir"]) / "completion.json").read_text())
    assert comp["status"] == "error" and comp["reported_by"] == "launcher"

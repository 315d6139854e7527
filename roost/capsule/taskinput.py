"""The task a script capsule starts with, and the result envelope it leaves.

Why a module of its own: the fallback chain (``input.json`` → ``task.md`` → ``input.txt`` →
none) and the ``murmur.message.v1`` envelopes are the file contract between the launcher, the
capsule and whoever reads its results. Keeping them pure (bytes in, text out) makes the chain
testable without a process; the two small writers at the bottom are the only I/O.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from roost.system.fsutil import write_atomic

__all__ = [
    "REQUEST_TYPE",
    "RESULT_TYPE",
    "SCHEMA",
    "TASK_FILES",
    "InitialTask",
    "format_request",
    "initial_task_from",
    "read_initial_task",
    "read_job_id",
    "result_envelope",
    "write_results",
]

SCHEMA = "murmur.message.v1"
REQUEST_TYPE = "murmur.code_task.request.v1"
RESULT_TYPE = "murmur.code_task.result.v1"
MAX_TASK_BYTES = 8 * 1024 * 1024
TASK_FILES = ("input.json", "task.md", "input.txt")
"""Where a task is looked for, in this order (the first usable one wins)."""


@dataclass(frozen=True, slots=True)
class InitialTask:
    text: str
    source_file: str  # "input.json" | "task.md" | "input.txt"


def format_request(raw: bytes) -> str | None:
    """``input.json`` as task text, or None when it is not a usable code-task request.

    ``Objective: …`` then ``Instructions: …`` and ``Context: …`` (each omitted when null),
    separated by blank lines. A request holding only its objective — what ``roostctl spawn
    --task TEXT`` and a plain-string ``task`` produce — is that text alone: the labels only
    tell the blocks apart, and a script capsule must see exactly what the user typed.
    """
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict) or obj.get("schema") != SCHEMA or obj.get("type") != REQUEST_TYPE:
        return None
    payload = obj.get("payload")
    if not isinstance(payload, dict):
        return None
    objective = payload.get("objective")
    if not isinstance(objective, str):
        return None
    blocks = [f"Objective: {objective}"]
    for key, label in (("instructions", "Instructions"), ("context", "Context")):
        value = payload.get(key)
        if isinstance(value, str):
            blocks.append(f"{label}: {value}")
        elif value is not None:
            return None
    return objective if len(blocks) == 1 else "\n\n".join(blocks)


def _read(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_TASK_BYTES)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def initial_task_from(name: str, raw: bytes) -> InitialTask | None:
    """The task one file of :data:`TASK_FILES` holds, or None when it is an unusable
    ``input.json`` (the chain then goes on to the next file)."""
    if name == "input.json":
        text = format_request(raw)
        return InitialTask(text, name) if text is not None else None
    return InitialTask(raw.decode("utf-8", "replace"), name)


def read_initial_task(workdir: Path) -> InitialTask | None:
    """Walk the chain; an unparseable ``input.json`` falls through to ``task.md`` (blocking)."""
    for name in TASK_FILES:
        raw = _read(workdir / name)
        task = initial_task_from(name, raw) if raw is not None else None
        if task is not None:
            return task
    return None


def read_job_id(workdir: Path, env: dict[str, str] | os._Environ[str]) -> str | None:
    """``MURMUR_JOB_ID`` from the environment, else ``meta/job_id.txt``, else None (top-level run)."""
    value = env.get("MURMUR_JOB_ID", "").strip()
    if value:
        return value
    raw = _read(workdir / "meta" / "job_id.txt")
    text = raw.decode("utf-8", "replace").strip() if raw is not None else ""
    return text or None


def result_envelope(output: str, job_id: str | None) -> dict[str, object]:
    return {
        "schema": SCHEMA,
        "type": RESULT_TYPE,
        "job_id": job_id,
        "payload": {"status": None, "summary": None, "files": None, "output": output},
    }


def write_results(workdir: Path, output: str, *, ok: bool, job_id: str | None) -> None:
    """``out/result.txt`` always; ``out/result.json`` only for a successful task (blocking, atomic)."""
    out = workdir / "out"
    out.mkdir(exist_ok=True)
    write_atomic(out / "result.txt", output.encode("utf-8"))
    if ok:
        body = json.dumps(result_envelope(output, job_id), indent=2, ensure_ascii=False) + "\n"
        write_atomic(out / "result.json", body.encode("utf-8"))
    else:
        (out / "result.json").unlink(missing_ok=True)

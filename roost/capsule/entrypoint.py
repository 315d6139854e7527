"""Running a script capsule's entrypoint for one task.

Why it looks like this: the entrypoint is untrusted code from an artifact, so it runs in its own
session and process group, with the task on stdin and its stdout as the task's output. Stdout is
read as it is written and handed on a line at a time (``on_output``: the door streams it), and at
most ``output_cap`` bytes of it are kept; the rest is read and dropped, so an entrypoint that
writes without end neither blocks on a full pipe nor fills the host's memory. It never
inherits the lifeline (close-on-exec) nor any token: the host's env is copied and the lifeline
variable removed. Whatever must hold from its first instruction (rlimits, Landlock) is set by a
``preexec`` hook between fork and exec. A task ends with its entrypoint: anything the entrypoint
left running is stopped then. Stopping is :func:`roost.capsule.reaper.kill_tree`:
SIGTERM to the group and to every descendant (the host is their subreaper, so double-forked and
``setsid`` descendants are found too), then SIGKILL after a grace shorter than the launcher's.
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from roost.capsule.reaper import KILL_GRACE_SECS, descendants, kill_tree
from roost.core.completion import cut_detail

__all__ = ["EntrypointResult", "Launch", "resolve_argv", "run_entrypoint", "stop_tree", "task_env"]

STDERR_LINES = 20
READ_CHUNK = 16 * 1024  # one read of stdout at most; a partial line this long is handed on as it is
PARTIAL_LINE_SECS = 0.05  # a partial line is handed on once nothing more came for this long
DEFAULT_OUTPUT_CAP = 1024 * 1024


class EntrypointError(RuntimeError):
    """The entrypoint cannot be started; the message is one sentence."""


def resolve_argv(entrypoint: list[str], artifact_dir: Path) -> list[str]:
    """A relative first word naming a file of the unpacked artifact runs that file; else PATH."""
    first, rest = entrypoint[0], entrypoint[1:]
    if not os.path.isabs(first):
        candidate = (artifact_dir / first).resolve()
        if candidate.is_file() and candidate.is_relative_to(artifact_dir.resolve()):
            return [str(candidate), *rest]
        if "/" in first:
            raise EntrypointError(f"the entrypoint '{first}' is not a file of the artifact")
        found = shutil.which(first)
        if found is None:
            raise EntrypointError(f"the entrypoint '{first}' is neither a file of the artifact nor on PATH")
        return [found, *rest]
    return list(entrypoint)


def task_env(base: Mapping[str, str], extra: Mapping[str, str | None]) -> dict[str, str]:
    """The host's env plus the ``MURMUR_*`` names, minus the lifeline and any ``OTEL_*`` setting
    but the service name (an exporter's endpoint and headers are not the entrypoint's; its
    ``TRACEPARENT`` is); our python's dir first on PATH."""
    env = {
        k: v
        for k, v in base.items()
        if k != "MURMUR_SPAWNER_LIFELINE" and (not k.startswith("OTEL_") or k == "OTEL_SERVICE_NAME")
    }
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    bindir = os.path.dirname(sys.executable)
    path = env.get("PATH", os.defpath)
    env["PATH"] = bindir + os.pathsep + path if path else bindir
    return env


@dataclass(frozen=True, slots=True)
class EntrypointResult:
    returncode: int
    stdout: str
    stderr_tail: list[str]
    truncated: bool = False  # stdout went past the output cap; what is kept is its first bytes
    stdout_bytes: int = 0  # everything it wrote, kept or not
    stderr_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def failure(self) -> str:
        """One sentence (plus the last stderr lines) for a failed task."""
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            text = f"task failed: the entrypoint was killed by {name}"
        else:
            text = f"task failed: the entrypoint exited with status {self.returncode}"
        tail = [ln for ln in self.stderr_tail if ln.strip()]
        if tail:
            text += "; its last stderr lines were:\n" + "\n".join(tail)
        return cut_detail(text)


async def _pump_stderr(stream: asyncio.StreamReader, tail: collections.deque[str]) -> int:
    """Keep the last lines and echo each to our stderr (the launcher keeps its own tail of it);
    how many bytes it carried."""
    total = 0
    while True:
        line = await stream.readline()
        if not line:
            return total
        total += len(line)
        text = line.decode("utf-8", "replace").rstrip("\n")
        tail.append(text)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(text + "\n")
            sys.stderr.flush()


async def _pump_stdout(
    stream: asyncio.StreamReader, cap: int, on_output: Callable[[str], None] | None
) -> tuple[str, bool, int]:
    """Read stdout to its end: (the first ``cap`` bytes as text, whether more came, how many
    bytes came in all).

    What is kept goes to ``on_output`` a line at a time as it arrives: complete lines at once, a
    partial line once it reaches :data:`READ_CHUNK` or nothing more came for
    :data:`PARTIAL_LINE_SECS` (an entrypoint that writes words without a newline is still seen).
    """
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    kept: list[str] = []
    pending = ""  # kept text not yet handed on: the start of a line
    room = cap
    truncated = False
    total = 0
    while True:
        if pending:
            try:
                data = await asyncio.wait_for(stream.read(READ_CHUNK), PARTIAL_LINE_SECS)
            except TimeoutError:
                _hand_on(on_output, pending)
                pending = ""
                continue
        else:
            data = await stream.read(READ_CHUNK)
        if not data:
            break
        total += len(data)
        if truncated:
            continue  # drained and dropped: the entrypoint must never block on a full pipe
        if len(data) > room:
            data, truncated = data[:room], True
        room -= len(data)
        text = decoder.decode(data)
        if not text:
            continue
        kept.append(text)
        pending += text
        cut = pending.rfind("\n") + 1
        if cut == 0 and len(pending) >= READ_CHUNK:
            cut = len(pending)
        if cut:
            _hand_on(on_output, pending[:cut])
            pending = pending[cut:]
    tail = decoder.decode(b"", final=True)
    kept.append(tail)
    _hand_on(on_output, pending + tail)
    return "".join(kept), truncated, total


def _hand_on(on_output: Callable[[str], None] | None, text: str) -> None:
    if text and on_output is not None:
        on_output(text)


async def stop_tree(proc: asyncio.subprocess.Process, grace: float = KILL_GRACE_SECS) -> None:
    """SIGTERM the entrypoint's group and every descendant, SIGKILL after ``grace``, reap the leader."""
    await kill_tree(proc.pid if proc.returncode is None else None, grace=grace, keep=(proc.pid,))
    await proc.wait()


async def _exited(pid: int) -> None:
    """Wait for ``pid`` to exit (a pidfd), without waiting for its pipes to close as ``wait()``
    does: a descendant the entrypoint left behind may hold them open."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Launch:
    """How the entrypoint is started: the argv, a hook run in the child before exec, fds it keeps."""

    argv: list[str]
    preexec: Callable[[], None] | None = None
    pass_fds: tuple[int, ...] = ()
    after_spawn: Callable[[], None] | None = None


async def run_entrypoint(
    launch: Launch | list[str],
    *,
    text: str,
    cwd: Path,
    env: Mapping[str, str],
    grace: float = KILL_GRACE_SECS,
    on_start: Callable[[int], None] | None = None,
    on_output: Callable[[str], None] | None = None,
    output_cap: int = DEFAULT_OUTPUT_CAP,
) -> EntrypointResult:
    """Run one task; cancelling this coroutine stops the whole tree first, then re-raises."""
    if not isinstance(launch, Launch):
        launch = Launch(list(launch))
    argv = launch.argv
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            env=dict(env),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=launch.preexec,
            pass_fds=launch.pass_fds,
        )
    except subprocess.SubprocessError as exc:
        reason = str(exc) or type(exc).__name__
        return EntrypointResult(126, "", [f"could not prepare the entrypoint {argv[0]} before exec: {reason}"])
    except OSError as exc:
        return EntrypointResult(127, "", [f"could not start the entrypoint {argv[0]}: {exc.strerror or exc}"])
    finally:
        if launch.after_spawn is not None:
            launch.after_spawn()  # the parent's copy of a ruleset fd, say
    if on_start is not None:
        on_start(proc.pid)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
    stderr_task = asyncio.create_task(_pump_stderr(proc.stderr, tail))

    async def feed() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(text.encode("utf-8"))
            await proc.stdin.drain()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.close()

    feeder = asyncio.create_task(feed())
    reader = asyncio.create_task(_pump_stdout(proc.stdout, max(output_cap, 0), on_output))
    try:
        await _exited(proc.pid)
        # The task ends with its entrypoint: whatever it left running (a daemonised helper that
        # may still hold our pipes) is stopped now, not when the session ends.
        if any(d.pid != proc.pid for d in descendants()):  # its own zombie is asyncio's to reap
            await kill_tree(None, grace=grace, keep=(proc.pid,))
        out, truncated, out_bytes = await reader
        await proc.wait()
        await feeder
        err_bytes = await stderr_task
    except asyncio.CancelledError:
        await stop_tree(proc, grace)
        for t in (feeder, stderr_task, reader):
            t.cancel()
        raise
    return EntrypointResult(proc.returncode or 0, out, list(tail), truncated, out_bytes, err_bytes)

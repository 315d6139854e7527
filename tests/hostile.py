"""A payload that tries to outlive its job, shared by the launcher's and the capsule host's tests.

It starts a direct child in its own process group that ignores SIGTERM, and a double-forked
grandchild that calls setsid (leaving the group) and ignores SIGTERM. Every pid lands in
``pids.txt`` in its working directory; then the payload itself ignores SIGTERM and stays.
"""

from __future__ import annotations

from pathlib import Path

import psutil


def hostile_payload(*, read_stdin: bool) -> str:
    """The payload's Python source; with ``read_stdin`` it reads its task before it stays."""
    wait = "sys.stdin.read()\n" if read_stdin else ""
    return f"""
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
out = os.path.join(os.getcwd(), "pids.txt")

def note(kind):
    with open(out, "a") as f:
        f.write(f"{{kind}} {{os.getpid()}}\\n")

note("entrypoint")
if os.fork() == 0:
    note("child")
    while True:
        time.sleep(1)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        note("escaped")
        while True:
            time.sleep(1)
    os._exit(0)
{wait}while True:
    time.sleep(1)
"""


def recorded_pids(path: Path) -> dict[str, int]:
    """The pids the payload wrote to ``pids.txt``, by kind (entrypoint, child, escaped)."""
    out: dict[str, int] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            kind, pid = line.split()
            out[kind] = int(pid)
    return out


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False

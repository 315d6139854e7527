"""The README's Quickstart, walked command by command against a fresh daemon, as a new user would.

The commands are parsed from README.md itself (every ``sh`` block of the Quickstart), so a README
edit that breaks the walk breaks this test, and they run verbatim: the walk happens in a network
and mount namespace of its own (``unshare``), where 127.0.0.1:7700 is free and ``/tmp`` is a
private tmpfs, so ``localhost:7700`` and ``/tmp/capsule-a`` need no rewriting on a shared machine.
The first terminal activates a ``.venv`` (the test's own virtualenv, linked) and starts the
daemon exactly as the README says; the second terminal is a fresh shell with no virtualenv on
its PATH, so it has to activate one as the README tells it to. Only two commands are not run:
``python3 -m venv .venv`` and ``pip install .`` (the ``.venv`` they would make is the test's own,
which .ci/run installs the same way). ``JOB_ID``, a placeholder the reader replaces, becomes the
orchestrator's job. Each step's promised output is asserted.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from ops.support import REPO

pytestmark = pytest.mark.slow

MARK = "@@step@@"
DUPLICATE = "(the register line again, same session id)"
NOT_RUN = ("python3 -m venv .venv", "pip install .")


def quickstart_blocks(readme: str) -> list[list[str]]:
    """The command lines of each ``sh`` block in the Quickstart section (comments kept off)."""
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    out = []
    for block in blocks:
        lines = [ln for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        out.append(lines)
    return out


def test_blocks_are_parsed() -> None:
    blocks = quickstart_blocks((REPO / "README.md").read_text())
    assert blocks[0][-1].startswith("mur-roost --config deploy/roost.toml")
    assert blocks[1][0].startswith(". .venv/bin/activate")  # the second terminal activates the venv
    assert any("roostctl drain --wait" in ln for b in blocks for ln in b)


def _first_terminal(setup: list[str]) -> list[str]:
    """The setup block as run here: its commands but the two install steps, the daemon last."""
    lines: list[str] = []
    for line in setup:
        for cmd in (c.strip() for c in line.split("#", 1)[0].split("&&")):
            if cmd and cmd not in NOT_RUN:
                lines.append(cmd)
    assert lines[-1] == "mur-roost --config deploy/roost.toml", lines
    return lines


def test_readme_quickstart_walk() -> None:
    readme = (REPO / "README.md").read_text()
    setup, *steps = quickstart_blocks(readme)
    first = _first_terminal(setup)
    assert "roostctl" not in " ".join(first[:-1]) and len(first) == 2  # ". .venv/bin/activate", the daemon
    walk = Path(tempfile.mkdtemp(prefix="roost-walk-", dir="/var/tmp"))  # outside the private /tmp
    try:
        (walk / "deploy").mkdir()
        (walk / "deploy" / "examples").symlink_to(REPO / "deploy" / "examples")
        shutil.copy(REPO / "deploy" / "roost.toml", walk / "deploy" / "roost.toml")
        (walk / ".venv").symlink_to(Path(sys.prefix))
        _walk(walk, first, steps)
    finally:
        shutil.rmtree(walk, ignore_errors=True)


def _private_tmp(walk: Path) -> str:
    """Shell lines that give the namespace a private ``/tmp`` (a tmpfs) in which this checkout and
    the test's virtualenv stay reachable where they are, when they live under ``/tmp`` (a clean
    clone in CI may): the host's ``/tmp`` is bound aside first, and their top folders bound back."""
    tmp = Path("/tmp")
    keep = sorted(
        {p.relative_to(tmp).parts[0] for p in (REPO.resolve(), Path(sys.prefix).resolve()) if p.is_relative_to(tmp)}
    )
    aside = walk / ".host-tmp"
    lines = [f"mkdir -p {aside} && mount --bind /tmp {aside} && mount -t tmpfs tmpfs /tmp || exit 99"]
    for top in keep:
        name = shlex.quote(top)
        lines.append(f"mkdir -p /tmp/{name} && mount --bind {aside}/{name} /tmp/{name} || exit 99")
    return "\n".join(lines)


def _walk(walk: Path, first: list[str], steps: list[list[str]]) -> None:
    commands = [re.sub(r"\bJOB_ID\b", "$JOB_ID", ln) for block in steps for ln in block]
    second: list[str] = []
    commands_run: list[str] = []
    for i, cmd in enumerate(commands):
        commands_run.append(cmd)
        if "$JOB_ID" in cmd and "JOB_ID=" not in "\n".join(second):
            second.append(
                "JOB_ID=$(roostctl jobs --json | python3 -c 'import json,sys; "
                'print([j for j in json.load(sys.stdin)["jobs"] if j["name"] == "orchestrator"][0]["job_id"])\')'
            )
        second.append(f"echo {MARK}{i}; echo {MARK}{i} >&2")
        second.append(cmd)
        second.append(f"echo {MARK}rc=$?")
        if cmd.startswith("CRED=$(curl"):
            # The same session id again: refused with the daemon's sentence, not a traceback.
            commands_run.append(DUPLICATE)
            second.append(f"echo {MARK}dup; echo {MARK}dup >&2")
            second.append(cmd.replace("CRED=$(", "DUP=$(", 1))
            second.append(f"echo {MARK}rc=$?")
    # A fresh terminal: no virtualenv on PATH, none of the test's environment.
    bare = {"HOME": str(walk), "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "NO_COLOR": "1"}
    terminal2 = "env -i " + " ".join(f"{k}={shlex.quote(v)}" for k, v in bare.items())
    terminal2 += " bash -c " + shlex.quote("\n".join(second))
    daemon_cmd = " && ".join(first)
    script = "\n".join(
        [
            "set -u",
            "ip link set lo up && mount --make-rprivate / || exit 99",
            _private_tmp(walk),
            f"( {daemon_cmd} ) >daemon.log 2>&1 &",
            "DAEMON=$!",
            "for _ in $(seq 300); do [ -S deploy/state/admin.sock ] && break; sleep 0.1; done",
            terminal2,
            "wait $DAEMON; echo daemon-exit=$? >&2",
        ]
    )
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(walk), "LANG": os.environ.get("LANG", "C.UTF-8")}
    run = subprocess.run(
        ["unshare", "--net", "--mount", "bash", "-c", script],
        cwd=walk,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert "daemon-exit=0" in run.stderr, (run.stderr[-3000:], (walk / "daemon.log").read_text()[-3000:])
    outs = run.stdout.split(MARK)[1:]
    errs = run.stderr.split(MARK)[1:]
    results: dict[str, tuple[int, str, str]] = {}
    for i, cmd in enumerate(commands_run):
        body = outs[2 * i].split("\n", 1)[1] if len(outs) > 2 * i else ""
        rc_part = outs[2 * i + 1] if len(outs) > 2 * i + 1 else "rc=-1"
        err = errs[i].split("\n", 1)[1] if len(errs) > i else ""
        results[cmd] = (int(rc_part.split("=", 1)[1].split()[0]), body, err)
        print(f"$ {cmd}\n[rc {results[cmd][0]}]\n{body}{err}")

    def step(prefix: str) -> tuple[int, str, str]:
        hits = [v for k, v in results.items() if k.startswith(prefix)]
        assert hits, f"the README no longer runs '{prefix}'"
        return hits[0]

    rc, out, err = step(". .venv/bin/activate")
    assert rc == 0, err
    rc, out, err = step("roostctl doctor")
    assert "command not found" not in err and re.search(r"^ok\s+daemon", out, flags=re.M), (out, err)
    rc, out, _ = step("roostctl status")
    assert rc == 0 and "serving" in out and "127.0.0.1:7700" in out
    rc, out, err = step("roostctl spawn orchestrator@0.1.0")
    assert rc == 0, err
    assert "1 delegation(s) below it" in err and re.search(r"state\s+complete", out)
    rc, out, _ = step("cat deploy/state/jobs/*/out/result.txt")
    assert rc == 0 and "words: 6" in out  # the words the user typed, and only those
    rc, out, _ = step("roostctl tree")
    assert rc == 0 and out.strip(), "tree prints something without --all"
    rc, out, _ = step("roostctl jobs")
    assert rc == 0 and "orchestrator@0.1.0" in out and "worker@0.1.0" in out and "complete" in out
    rc, out, _ = step("roostctl job $JOB_ID")
    assert rc == 0 and "completion" in out and "ok, reported by" in out
    rc, out, _ = step("roostctl logs $JOB_ID")
    assert rc == 0 and "result | words: 6" in out
    rc, out, _ = step("roostctl events")
    assert rc == 0 and "roost.process" in out
    rc, out, err = step(DUPLICATE)
    assert rc == 1 and "register refused: not authorised" in err and "Traceback" not in err, err
    rc, out, _ = step("curl -s localhost:7700/resources/peer/")
    assert out.strip() == "hello from A"
    rc, out, _ = step("curl -s localhost:7700/a2a/send")
    assert rc == 0 and '"traceparent"' in out
    rc, out, _ = step("cat /tmp/capsule-a/.murmur/$SID/trace.jsonl")
    assert rc == 0 and "peer_handle_mint" in out and "a2a_send" in out
    rc, out, _ = step("roostctl sessions --all --wide")
    assert rc == 0 and "WORKDIR" in out and "/tmp/capsule-a" in out
    rc, out, err = step("roostctl cancel $JOB_B")
    assert rc == 0 and "terminated" in out
    rc, out, err = step("roostctl drain --wait")
    assert rc == 0 and "the daemon has stopped" in err, err
    assert run.returncode == 0, run.stderr[-3000:]

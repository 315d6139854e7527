"""The README's Quickstart, walked command by command against a fresh daemon, as a new user would.

The commands are parsed from README.md itself (every ``sh`` block of the Quickstart after the
set-up one), so a README edit that breaks the walk breaks this test. Only what cannot be the
same on a shared CI machine is rewritten: the daemon's port (a free one instead of 7700) and
``/tmp/capsule-a`` (a directory of this test's own). ``JOB_ID`` placeholders become the
orchestrator's job. Each step's promised output is asserted.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from ops.support import BIN, REPO, daemon_env, wait_for

pytestmark = pytest.mark.slow

MARK = "@@step@@"
DUPLICATE = "(the register line again, same session id)"


def quickstart_blocks(readme: str) -> list[list[str]]:
    """The command lines of each ``sh`` block in the Quickstart section (comments kept off)."""
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    out = []
    for block in blocks:
        lines = [ln for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        out.append(lines)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_blocks_are_parsed() -> None:
    blocks = quickstart_blocks((REPO / "README.md").read_text())
    assert blocks[0][-1].startswith("mur-roost --config deploy/roost.toml")
    assert any("roostctl drain --wait" in ln for b in blocks for ln in b)


def test_readme_quickstart_walk(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    setup, *steps = quickstart_blocks(readme)
    assert "pip install ." in " ".join(setup)
    port = _free_port()
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    (deploy / "examples").symlink_to(REPO / "deploy" / "examples")
    cfg = (REPO / "deploy" / "roost.toml").read_text()
    assert "port = 7700" in cfg
    (deploy / "roost.toml").write_text(cfg.replace("port = 7700", f"port = {port}"))
    capsule_a = tmp_path / "capsule-a"

    def rewrite(line: str) -> str:
        line = line.replace("localhost:7700", f"localhost:{port}").replace("/tmp/capsule-a", str(capsule_a))
        return re.sub(r"\bJOB_ID\b", "$JOB_ID", line)

    daemon = subprocess.Popen(
        [str(BIN / "mur-roost"), "--config", "deploy/roost.toml", "--log-format", "json"],
        cwd=tmp_path,
        env=daemon_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: (deploy / "state" / "admin.sock").exists(), timeout=30)
        commands = [rewrite(ln) for block in steps for ln in block]
        script = []
        commands_run: list[str] = []
        for i, cmd in enumerate(commands):
            commands_run.append(cmd)
            if "$JOB_ID" in cmd and "JOB_ID=" not in "\n".join(script):
                script.append(
                    "JOB_ID=$(roostctl jobs --json | python3 -c 'import json,sys; "
                    'print([j for j in json.load(sys.stdin)["jobs"] if j["name"] == "orchestrator"][0]["job_id"])\')'
                )
            script.append(f"echo {MARK}{i}; echo {MARK}{i} >&2")
            script.append(cmd)
            script.append(f"echo {MARK}rc=$?")
            if cmd.startswith("CRED=$(curl"):
                # The same session id again: refused with the daemon's sentence, not a traceback.
                commands_run.append(DUPLICATE)
                script.append(f"echo {MARK}dup; echo {MARK}dup >&2")
                script.append(cmd.replace("CRED=$(", "DUP=$(", 1))
                script.append(f"echo {MARK}rc=$?")
        env = {**daemon_env(), "NO_COLOR": "1"}
        env.pop("ROOST_STATE_DIR", None)
        env.pop("ROOST_SOCKET", None)
        env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
        run = subprocess.run(
            ["bash", "-c", "\n".join(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            stdin=subprocess.DEVNULL,
        )
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

        rc, out, err = step("roostctl doctor")
        assert re.search(r"^ok\s+daemon", out, flags=re.M), out
        rc, out, _ = step("roostctl status")
        assert rc == 0 and "serving" in out
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
        rc, out, _ = step(f"curl -s localhost:{port}/resources/peer/")
        assert out.strip() == "hello from A"
        rc, out, _ = step(f"curl -s localhost:{port}/a2a/send")
        assert rc == 0 and '"traceparent"' in out
        rc, out, _ = step(f"cat {capsule_a}/.murmur/$SID/trace.jsonl")
        assert rc == 0 and "peer_handle_mint" in out and "a2a_send" in out
        rc, out, _ = step("roostctl sessions --all --wide")
        assert rc == 0 and "WORKDIR" in out and str(capsule_a) in out
        rc, out, err = step("roostctl cancel $JOB_B")
        assert rc == 0 and "terminated" in out
        rc, out, err = step("roostctl drain --wait")
        assert rc == 0 and "the daemon has stopped" in err, err
        assert daemon.wait(timeout=30) == 0
        assert run.returncode == 0, run.stderr
    finally:
        if daemon.poll() is None:
            daemon.terminate()
            daemon.wait(timeout=30)
        shutil.rmtree(capsule_a, ignore_errors=True)

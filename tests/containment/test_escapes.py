"""Hostile capsules: each escape is tried, and recorded, under every class this host achieves.

The same payload also runs ``advisory``: there every escape succeeds, which proves each target
exists and is reachable, so a refusal under ``scoped``/``sealed`` is denial, not absence. Tests
run as root; Landlock and the namespaces restrict root too.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roost.capsule.probe import probe_host
from roost.state.registry.packing import PackError
from tests.support.capsules import Capsules, base_env, trace_events
from tests.support.registry import RegistryBuilder

OFFERED = probe_host().offered
ORDER = {"advisory": 0, "scoped": 1, "sealed": 2}
CLASSES = [c for c in ("scoped", "sealed") if ORDER[c] <= ORDER[OFFERED]]

HOSTILE = r"""
import json, os, socket, subprocess, sys
t = json.loads(sys.stdin.read())
res = {}

def attempt(name, fn):
    try:
        out = fn()
        res[name] = "ALLOWED" + ("" if out is None else f" {out}")
    except OSError as exc:
        res[name] = f"denied {exc.errno}"

def read(p):
    with open(p, "rb") as f:
        return len(f.read())

def write(p):
    with open(p, "w") as f:
        f.write("escaped")

def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.close()

def run(argv):
    return subprocess.run(argv, capture_output=True, timeout=20).returncode

attempt("read_shadow", lambda: read("/etc/shadow"))
attempt("read_other_session", lambda: read(t["other"]))
attempt("read_ssh", lambda: read(t["ssh"]))
attempt("write_outside", lambda: write(t["outside"]))
attempt("create_in_workdir_root", lambda: write("root-file.txt"))
attempt("follow_symlink", lambda: read("out/escape-link"))
attempt("exec_curl", lambda: run(["/usr/bin/curl", "--version"]))
script = "out/tool.sh"
with open(script, "w") as f:
    f.write("#!/bin/sh\necho ran\n")
os.chmod(script, 0o755)
attempt("exec_workdir_script", lambda: run([os.path.abspath(script)]))
attempt("connect_unlisted", lambda: connect(t["unlisted_port"]))
attempt("connect_listed", lambda: connect(t["listed_port"]))
attempt("exec_allowed", lambda: run(["true"]))
attempt("write_in_scope", lambda: write("out/ok.txt"))
attempt("read_own_artifact", lambda: read(sys.argv[0]))
def procs():
    return len([p for p in os.listdir("/proc") if p.isdigit()])
attempt("proc_count", procs)
attempt("see_test_runner", lambda: read(f"/proc/{t['runner_pid']}/status"))
sys.stdout.write(json.dumps(res))
"""


@pytest.fixture
def listeners() -> Iterator[tuple[int, int]]:
    socks = []
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        socks.append(s)
    yield socks[0].getsockname()[1], socks[1].getsockname()[1]
    for s in socks:
        s.close()


def _setup(tmp_path: Path) -> dict[str, Any]:
    other = tmp_path / "other-session"
    other.mkdir()
    (other / "secret.txt").write_text("another session's secret")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    return {"other": str(other / "secret.txt"), "ssh": str(home / ".ssh" / "id_ed25519"), "home": str(home)}


async def _run_hostile(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, cls: str, ports: tuple[int, int]
) -> tuple[dict[str, str], list[dict[str, Any]], Path]:
    unlisted, listed = ports
    paths = _setup(tmp_path)
    name = f"hostile-{cls}"
    registry.add(
        name,
        script=HOSTILE,
        capabilities={
            "containment": cls,
            "filesystem": {"scope": "out"},
            "shell": {"allow": ["true"]},
            "network": {"allow": [f"127.0.0.1:{listed}"]},
        },
        extra={"lifecycle": {"after_task": "exit"}},
    )
    work = tmp_path / f"w-{cls}"
    (work / "out").mkdir(parents=True)
    os.symlink(paths["other"], work / "out" / "escape-link")
    task = {
        "other": paths["other"],
        "ssh": paths["ssh"],
        "outside": str(tmp_path / f"outside-{cls}.txt"),
        "unlisted_port": unlisted,
        "listed_port": listed,
        "runner_pid": os.getpid(),
    }
    (work / "task.md").write_text(json.dumps(task))
    cp = await capsules.start(f"{name}@0.1.0", work, registry=registry.root, env=base_env(HOME=paths["home"]))
    rc = await cp.wait(within=60)
    result = (work / "out" / "result.txt").read_text()
    assert rc == 0, (result, cp.stderr)
    return json.loads(result), trace_events(cp.trace), work


ESCAPES = (
    "read_shadow",
    "read_other_session",
    "read_ssh",
    "write_outside",
    "create_in_workdir_root",
    "follow_symlink",
    "exec_curl",
    "exec_workdir_script",
    "connect_unlisted",
)


async def test_advisory_control_every_escape_succeeds(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, listeners: tuple[int, int]
) -> None:
    res, recs, _work = await _run_hostile(registry, capsules, tmp_path, "advisory", listeners)
    for name in ESCAPES:
        assert res[name].startswith("ALLOWED"), (name, res[name])
    assert (tmp_path / "outside-advisory.txt").read_text() == "escaped"
    start = recs[0]
    # containment_achieved is the host's class (seed 000), not the declared floor the session runs under.
    assert start["containment_declared"] == "advisory" and start["containment_achieved"] == OFFERED
    assert start["effective_grants"]["filesystem_boundary"]["restriction"] == "advisory"


@pytest.mark.parametrize("cls", CLASSES)
async def test_every_escape_is_denied_and_allowed_things_work(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, listeners: tuple[int, int], cls: str
) -> None:
    res, recs, work = await _run_hostile(registry, capsules, tmp_path, cls, listeners)
    for name in ESCAPES:
        assert res[name].startswith("denied"), (name, res[name])
    assert not (tmp_path / f"outside-{cls}.txt").exists()
    assert not (work / "root-file.txt").exists()
    assert res["exec_allowed"] == "ALLOWED 0"
    assert res["write_in_scope"] == "ALLOWED" and (work / "out" / "ok.txt").read_text() == "escaped"
    assert res["read_own_artifact"].startswith("ALLOWED")
    start = recs[0]
    assert start["containment_declared"] == cls and start["containment_achieved"] == OFFERED
    assert start["workdir_exec"] is False and start["userns_grant"] in (
        "apparmor_absent",
        "restriction_disabled_host_wide",
        "profile_confining",
        "withheld",
    )
    grants = start["effective_grants"]
    assert grants["floor_met"] is True and grants["filesystem_boundary"]["restriction"] == "enforced"
    assert grants["enforcement_tier"] == OFFERED
    if cls == "scoped":
        assert res["connect_listed"] == "ALLOWED"
        assert any("Landlock filters TCP by port" in a for a in grants["advisory"])
    else:
        # sealed: only a loopback of its own, so not even the listed port is reachable, and the
        # host's processes (this test runner among them) are invisible.
        assert res["connect_listed"].startswith("denied")
        assert res["see_test_runner"].startswith("denied")
        count = int(res["proc_count"].split()[1])
        assert count < 10, res["proc_count"]


READ_ONLY = r"""
import json, os, sys
res = {}
def attempt(name, fn):
    try:
        fn()
        res[name] = "ALLOWED"
    except OSError as exc:
        res[name] = f"denied {exc.errno}"
def read(p):
    with open(p) as f:
        f.read()
def write(p):
    with open(p, "a") as f:
        f.write("changed")
attempt("read_ref", lambda: read("ref/data.txt"))
attempt("write_ref", lambda: write("ref/data.txt"))
attempt("read_frozen", lambda: read("out/frozen/data.txt"))
attempt("write_frozen", lambda: write("out/frozen/data.txt"))
attempt("write_scope", lambda: write("out/free.txt"))
sys.stdout.write(json.dumps(res))
"""


@pytest.mark.parametrize("cls", CLASSES)
async def test_read_only_subtrees(registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, cls: str) -> None:
    registry.add(
        f"ro-{cls}",
        script=READ_ONLY,
        capabilities={"containment": cls, "filesystem": {"scope": "out", "read_only": ["ref", "out/frozen"]}},
        extra={"lifecycle": {"after_task": "exit"}},
    )
    work = tmp_path / "w"
    (work / "ref").mkdir(parents=True)
    (work / "ref" / "data.txt").write_text("reference")
    (work / "out" / "frozen").mkdir(parents=True)
    (work / "out" / "frozen" / "data.txt").write_text("frozen")
    (work / "task.md").write_text("go")
    cp = await capsules.start(f"ro-{cls}@0.1.0", work, registry=registry.root)
    assert await cp.wait(within=60) == 0, cp.stderr
    res = json.loads((work / "out" / "result.txt").read_text())
    assert res["read_ref"] == "ALLOWED" and res["write_ref"].startswith("denied")
    assert (work / "ref" / "data.txt").read_text() == "reference"
    assert res["read_frozen"] == "ALLOWED" and res["write_scope"] == "ALLOWED"
    grants = trace_events(cp.trace)[0]["effective_grants"]
    assert grants["read_only_paths"] == ["ref", "out/frozen"]
    if cls == "sealed":  # a read-only bind over the scope
        assert res["write_frozen"].startswith("denied")
        assert (work / "out" / "frozen" / "data.txt").read_text() == "frozen"
    else:  # Landlock cannot narrow a grant: said so, never silently dropped
        assert res["write_frozen"] == "ALLOWED"
        assert any("'out/frozen'" in a and "not write-protected" in a for a in grants["advisory"])


@pytest.mark.parametrize("scope", ["../elsewhere", "/etc", "out/../../x"])
async def test_a_scope_outside_the_workdir_is_refused(registry: RegistryBuilder, scope: str) -> None:
    # Refused where the manifest is first read (packing it into the registry), so it is never
    # published, let alone launched.
    with pytest.raises(PackError) as refused:
        registry.add(
            "wide",
            script="print('ran')\n",
            capabilities={"containment": "scoped", "filesystem": {"scope": scope}},
            extra={"lifecycle": {"after_task": "exit"}},
        )
    assert str(refused.value).endswith(
        f"E-CAP-002: wide@0.1.0 declares the filesystem path '{scope}', which is not a relative path inside "
        "the workdir, so its containment cannot be drawn"
    )
    assert list(registry.root.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "task", "expect_rc", "expect"),
    [
        ("worker", "alpha beta", 0, "reversed: beta alpha"),
        ("crasher", "boom", 3, "crasher:"),  # the host exits with its failed entrypoint's own status
        ("sleeper", "0.2", 0, ""),
    ],
)
async def test_examples_run_unchanged_under_scoped_hosts(
    capsules: Capsules, tmp_path: Path, name: str, task: str, expect_rc: int, expect: str
) -> None:
    if "scoped" not in CLASSES:
        pytest.skip("this host cannot enforce scoped")
    import shutil

    import yaml

    from roost.state.registry.packing import pack_capsule
    from tests.support.registry import EXAMPLES

    src = tmp_path / "src" / name
    shutil.copytree(EXAMPLES / "capsules" / name, src)
    manifest = yaml.safe_load((src / "murmur.yaml").read_text())
    manifest.setdefault("capabilities", {})["containment"] = "scoped"
    (src / "murmur.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    reg = tmp_path / "registry"
    reg.mkdir()
    pack_capsule(src, reg)
    work = tmp_path / "w"
    work.mkdir()
    (work / "task.md").write_text(task)
    cp = await capsules.start(f"{name}@0.1.0", work, registry=reg)
    assert await cp.wait(within=60) == expect_rc, cp.stderr
    assert expect in (work / "out" / "result.txt").read_text()
    assert trace_events(cp.trace)[0]["containment_achieved"] == OFFERED

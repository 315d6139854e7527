"""A hostile contained capsule, launched as root by the operator, probes what it can reach.

It does not read our tests: it looks for the admin socket in the state dir, for other sessions'
host sockets in ``/proc/net/unix``, asks the daemon about another job over TCP and for a top-level
launch of its own (outside its spawn envelope), reads its own
capabilities, and tries the scheduler on a root process outside its sandbox and ``memfd`` exec.
Each is what was seen to work before (docs/security.md, threat E4/E5); each must now be refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from roost.capsule.probe import probe_host
from roost.core.authz import ADMIN_IN_JOB, NOT_ENTRYPOINT
from roost.http.job_routes import LAUNCH_IN_JOB
from roost.http.referee_routes import REGISTER_IN_JOB
from roost.observe.tracelines import read_trace, trace_path
from tests.support.launcher import wait_for
from tests.support.registry import RegistryBuilder

OFFERED = probe_host().offered
ORDER = {"advisory": 0, "scoped": 1, "sealed": 2}

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the operator's jobs run as root here"),
    pytest.mark.skipif(ORDER[OFFERED] < 1, reason="this host cannot enforce scoped"),
]

HOSTILE = r"""
import ctypes, http.client, json, os, socket, sys
t = json.loads(sys.stdin.read())
res = {}
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, fn):
    try:
        res[name] = "ALLOWED " + str(fn())
    except OSError as exc:
        res[name] = f"denied {exc.errno}"

class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.path_ = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path_)

def over_unix(path, method, target, body=None):
    c = Unix(path)
    c.request(method, target, body=body, headers={"content-type": "application/json"})
    r = c.getresponse()
    return f"{r.status} {r.read().decode()[:200]}"

def status():
    with open("/proc/self/status") as f:
        return {k: v.strip() for k, v in (l.split(":", 1) for l in f if ":" in l)}

st = status()
res["caps"] = [st["CapEff"], st["CapPrm"], st["CapBnd"], st["CapAmb"], st["NoNewPrivs"]]
attempt("admin_config", lambda: over_unix(t["admin"], "GET", "/config"))
attempt("admin_cancel", lambda: over_unix(t["admin"], "POST", "/jobs/" + t["other_job"] + "/cancel"))
mine = os.environ.get("MURMUR_HOST_SOCKET")
socks = []
with open("/proc/net/unix") as f:
    for line in f:
        p = line.split()[-1]
        if p.endswith("/host.sock") and p != mine:
            socks.append(p)
res["found_other_host_sockets"] = len(socks)
share = json.dumps({"path": "x", "peer": "p@127.0.0.1:9"})
for i, p in enumerate(socks):
    attempt(f"other_share_{i}", lambda p=p: over_unix(p, "POST", "/share", share))
get = json.dumps({"peer_url": "http://127.0.0.1:9", "task_id": "t"})
attempt("own_socket", lambda: over_unix(mine, "POST", "/get", get))
def tcp(path, method="GET", body=None):
    c = http.client.HTTPConnection("127.0.0.1", t["port"], timeout=10)
    c.request(method, path, body=body, headers={"content-type": "application/json"})
    r = c.getresponse()
    return r.status if body is None else f"{r.status} {r.read().decode()[:300]}"
attempt("tcp_other_job", lambda: tcp("/jobs/" + t["other_job"]))
attempt("tcp_cancel_other_job", lambda: tcp("/jobs/" + t["other_job"] + "/cancel", "POST"))
top = json.dumps({"name": "sleeper", "version": "0.1.0", "task": "x"})
attempt("tcp_launch_top_level", lambda: tcp("/jobs", "POST", top))
# ...nor a top-level session of its own, whose credential would launch what it is not allowed.
reg = {"session_id": "ses_" + os.urandom(8).hex(), "name": "sleeper", "version": "0.1.0", "workdir": os.getcwd()}
attempt("tcp_register_top_level", lambda: tcp("/register", "POST", json.dumps(reg)))
def prio(pid):
    if libc.setpriority(0, pid, 10) != 0:
        raise OSError(ctypes.get_errno(), "setpriority")
    return 0
attempt("renice_outside", lambda: prio(t["victim"]))
attempt("renice_self", lambda: prio(0))
def pin(pid):
    mask = ctypes.c_ulong(1)
    if libc.sched_setaffinity(pid, ctypes.sizeof(mask), ctypes.byref(mask)) != 0:
        raise OSError(ctypes.get_errno(), "sched_setaffinity")
    return 0
attempt("pin_outside", lambda: pin(t["victim"]))
attempt("memfd", lambda: os.memfd_create("x"))
sys.stdout.write(json.dumps(res))
"""

SLEEPER = "import sys, time\nsys.stdin.read()\ntime.sleep(60)\n"


async def test_a_hostile_scoped_capsule_of_root_reaches_nothing_it_was_not_given(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path
) -> None:
    caps = {"containment": "scoped", "filesystem": {"scope": "out"}}
    registry.add("hostile", script=HOSTILE, capabilities=caps, extra={"lifecycle": {"after_task": "exit"}})
    registry.add("sleeper", script=SLEEPER, capabilities=caps)
    d = await daemon_factory(registry.root, spawn_allow=("hostile", "sleeper"), launch_timeout_secs=30.0)
    status, other, _, _ = await d.call("POST", "/jobs", json={"name": "sleeper", "version": "0.1.0", "task": "x"})
    assert status == 201, other
    # The sleeper's entrypoint is running (so its host socket is listening) before the probe.
    await wait_for(lambda: d.roost.launcher.jobs[other["job_id"]].state == "running", 30)
    task = {
        "admin": str(d.roost.admin.path),
        "other_job": other["job_id"],
        "port": d.port,
        "victim": os.getpid(),  # a root process outside the sandbox: this test runner
    }
    before = os.getpriority(os.PRIO_PROCESS, 0)
    affinity = os.sched_getaffinity(0)
    status, job, _, _ = await d.call(
        "POST", "/jobs", json={"name": "hostile", "version": "0.1.0", "task": json.dumps(task)}
    )
    assert status == 201, job
    out = Path(job["workdir"]) / "out" / "result.txt"
    await wait_for(lambda: out.exists() and out.read_text().strip().endswith("}"), 60)
    res = json.loads(out.read_text())
    cap_eff, cap_prm, cap_bnd, cap_amb, nnp = res["caps"]
    assert int(cap_eff, 16) == int(cap_prm, 16) == int(cap_bnd, 16) == int(cap_amb, 16) == 0, res["caps"]
    assert nnp == "1"
    assert res["admin_config"] == res["admin_cancel"] == _refused(ADMIN_IN_JOB), res
    assert res["found_other_host_sockets"] >= 1, res
    others = [v for k, v in res.items() if k.startswith("other_share_")]
    assert others and all(v == _refused(NOT_ENTRYPOINT) for v in others), res
    # Its own host socket still forwards for it (the daemon's own refusal of that peer comes back).
    assert res["own_socket"].startswith("ALLOWED 403") and "network policy" in res["own_socket"], res
    assert res["tcp_other_job"] == "ALLOWED 404" and res["tcp_cancel_other_job"] == "ALLOWED 404", res
    # No top-level launch for it either: that would be a capsule outside its own spawn envelope.
    assert res["tcp_launch_top_level"] == _refused(LAUNCH_IN_JOB), res
    assert res["tcp_register_top_level"] == _refused(REGISTER_IN_JOB), res
    assert not [r for r in d.roost.table.iter_running() if r.job_id is None]  # no session of its own
    assert sorted(j.name for j in d.roost.launcher.jobs.values()) == ["hostile", "sleeper"]
    assert res["renice_outside"].startswith("denied") and res["pin_outside"].startswith("denied"), res
    assert res["renice_self"] == "ALLOWED 0", res
    assert res["memfd"].startswith("denied"), res
    assert os.getpriority(os.PRIO_PROCESS, 0) == before and os.sched_getaffinity(0) == affinity
    assert d.roost.launcher.jobs[other["job_id"]].state == "running"
    assert (await d.call("POST", f"/jobs/{other['job_id']}/cancel"))[0] == 200


def _refused(sentence: str) -> str:
    """What the probe records for a 403 with ``sentence`` (the daemon's compact JSON)."""
    return f"ALLOWED 403 {json.dumps({'error': sentence}, separators=(',', ':'))}"


def _limit_evidence(job: dict[str, Any], name: str) -> tuple[object, object]:
    """What the records say of a limit: how ``effective_grants`` says it was enforced (under the
    name the manifest used), and the field the ``shell`` line names as hit."""
    lines = read_trace(trace_path(Path(job["workdir"]), job["session_id"]))
    enforced = lines[0]["effective_grants"]["resource_limits"]["enforced"].get(name)
    shells = [ln for ln in lines if ln["event_type"] == "shell"]
    return enforced, shells[-1].get("resource_limit") if shells else None


@pytest.mark.parametrize("name", ["max_processes", "cgroup_pids_max"])
async def test_a_root_child_cannot_fork_past_max_processes(
    daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, name: str
) -> None:
    """What was seen: a scoped capsule of root forked 120 times under ``max_processes: 40``
    (``RLIMIT_NPROC`` exempts uid 0). The limits policy binds it with a pids controller."""
    fork = (
        "import os, sys, time\nsys.stdin.read()\nn = 0\n"
        "for _ in range(120):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
        "    if pid == 0:\n        time.sleep(5)\n        os._exit(0)\n    n += 1\nprint(n)\n"
    )
    registry.add(
        "forker",
        script=fork,
        capabilities={"containment": "scoped", "filesystem": {"scope": "out"}, "resources": {name: 40}},
        extra={"lifecycle": {"after_task": "exit"}},
    )
    d = await daemon_factory(registry.root, spawn_allow=("forker",), launch_timeout_secs=30.0)
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "forker", "version": "0.1.0", "task": "go"})
    assert status == 201, job  # this host has a pids controller (else the launch is refused: compat tests)
    assert job["uid"] == 0 and d.roost.launcher.jobs[job["job_id"]].process_uid == 0  # root's own child
    out = Path(job["workdir"]) / "out" / "result.txt"
    await wait_for(lambda: out.exists() and out.read_text().strip().isdigit(), 60)
    assert int(out.read_text()) < 40
    await wait_for(lambda: d.roost.launcher.jobs[job["job_id"]].final, 30)
    enforced, hit = _limit_evidence(job, name)
    assert str(enforced).startswith("cgroup v") and str(enforced).endswith("pids"), enforced
    assert hit == "cgroup_pids_max"


@pytest.mark.parametrize("name", ["memory_bytes", "cgroup_memory_bytes"])
async def test_memory_bytes_binds(daemon_factory: Any, registry: RegistryBuilder, tmp_path: Path, name: str) -> None:
    """What was seen: 600 MiB allocated under ``memory_bytes: 256 MiB`` (no controller, nothing
    said). Now a memory controller holds the job to it and the ``shell`` line names the limit."""
    hog = (
        "import sys\nsys.stdin.read()\nblocks = [bytearray(64 << 20) for _ in range(10)]\n"
        "for b in blocks:\n    b[::4096] = b'x' * len(b[::4096])\nprint(len(blocks))\n"
    )
    registry.add(
        "hog",
        script=hog,
        capabilities={"filesystem": {"scope": "out"}, "resources": {name: 256 << 20}},
        extra={"lifecycle": {"after_task": "exit"}},
    )
    d = await daemon_factory(registry.root, spawn_allow=("hog",), launch_timeout_secs=30.0)
    status, job, _, _ = await d.call("POST", "/jobs", json={"name": "hog", "version": "0.1.0", "task": "go"})
    assert status == 201, job
    out = Path(job["workdir"]) / "out" / "result.txt"
    await wait_for(lambda: d.roost.launcher.jobs[job["job_id"]].final, 60)
    assert out.exists() and out.read_text().strip() != "10"  # 640 MiB were never held under a 256 MiB limit
    enforced, hit = _limit_evidence(job, name)
    assert str(enforced).startswith("cgroup v") and str(enforced).endswith("memory"), enforced
    assert hit == "cgroup_memory_bytes"

"""Running a program no ``shell.allow`` entry names, by the routes Landlock's execute right misses.

Tried as they were seen to work: the dynamic loader pointed at ``/usr/bin/id`` (the loader is
allowed; it only needs to *read* the program), the loader pointed at a copy of a program in the
writable scope, and ``memfd_create`` + ``fexecve``. Under ``advisory`` all of them run (the control:
the payload works); under ``scoped`` and ``sealed`` the first and the last are refused, and under
``sealed`` the copy too (its scope is mounted ``noexec``). Under ``scoped`` the copy in the
writable scope stays a documented residual risk (docs/security.md, E5): Landlock does not govern
``mmap(PROT_EXEC)``.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from pathlib import Path

import pytest

from roost.capsule.probe import probe_host
from tests.support.capsules import Capsules, base_env
from tests.support.registry import RegistryBuilder

OFFERED = probe_host().offered
ORDER = {"advisory": 0, "scoped": 1, "sealed": 2}
CLASSES = ["advisory", *(c for c in ("scoped", "sealed") if ORDER[c] <= ORDER[OFFERED])]
LOADER = sorted(glob.glob("/lib*/ld-linux*.so*"))

PAYLOAD = r"""
import ctypes, json, os, subprocess, sys
t = json.loads(sys.stdin.read())
res = {}
def run(name, argv, **kw):
    try:
        p = subprocess.run(argv, capture_output=True, timeout=20, **kw)
        res[name] = "ALLOWED" if p.returncode == 0 and b"uid=" in p.stdout else f"denied rc={p.returncode}"
    except OSError as exc:
        res[name] = f"denied {exc.errno}"
run("ld_so_usr_bin", [t["loader"], "/usr/bin/id"])
run("ld_so_copy_in_scope", [t["loader"], os.path.abspath("out/id-copy")])
def memfd_exec():
    fd = os.memfd_create("x", 0)
    data = open(t["elf"], "rb").read()
    os.write(fd, data)
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(os.open("/dev/null", os.O_WRONLY), 1)  # our stdout is the task's answer
            os.execve(fd, ["id"], {})
        finally:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)
try:
    rc = memfd_exec()
    res["memfd_fexecve"] = "ALLOWED" if rc == 0 else f"denied rc={rc}"
except OSError as exc:
    res["memfd_fexecve"] = f"denied {exc.errno}"
sys.stdout.write(json.dumps(res))
"""


@pytest.mark.skipif(not LOADER, reason="no glibc dynamic loader on this host")
@pytest.mark.parametrize("cls", CLASSES)
async def test_programs_outside_shell_allow_do_not_run(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, cls: str
) -> None:
    registry.add(
        f"exec-{cls}",
        script=PAYLOAD,
        capabilities={"containment": cls, "filesystem": {"scope": "out"}, "shell": {"allow": ["true"]}},
        extra={"lifecycle": {"after_task": "exit"}},
    )
    work = tmp_path / f"w-{cls}"
    (work / "out").mkdir(parents=True)
    shutil.copy("/usr/bin/id", work / "out" / "id-copy")  # as if the capsule had downloaded it
    elf = tmp_path / "elf-id"
    shutil.copy("/usr/bin/id", elf)  # what memfd exec writes: readable by the payload in every class
    os.chmod(elf, 0o644)
    os.chmod(tmp_path, 0o755)
    (work / "task.md").write_text(json.dumps({"loader": LOADER[0], "elf": str(work / "out" / "id-copy")}))
    cp = await capsules.start(f"exec-{cls}@0.1.0", work, registry=registry.root, env=base_env())
    rc = await cp.wait(within=60)
    result = (work / "out" / "result.txt").read_text()
    assert rc == 0, (result, cp.stderr)
    res = json.loads(result)
    if cls == "advisory":
        assert res == {"ld_so_usr_bin": "ALLOWED", "ld_so_copy_in_scope": "ALLOWED", "memfd_fexecve": "ALLOWED"}
        return
    assert res["ld_so_usr_bin"].startswith("denied"), res
    assert res["memfd_fexecve"].startswith("denied"), res
    if cls == "sealed":  # the scope is mounted noexec
        assert res["ld_so_copy_in_scope"].startswith("denied"), res
    else:  # the documented residual risk under scoped (E5)
        assert res["ld_so_copy_in_scope"] == "ALLOWED", res

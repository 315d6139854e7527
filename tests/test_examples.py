"""The checked-in example registry: it matches its sources, resolves, and its capsules behave.

``deploy/examples/registry`` is built by ``deploy/examples/build.py`` from
``deploy/examples/capsules``. Packing is deterministic, so repacking the sources must give the
same bytes; if this fails, run ``python deploy/examples/build.py`` and commit the result.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from roost.core.envelope import Envelope, violation
from roost.core.manifest import Manifest
from roost.state.registry import Registry
from roost.state.registry.packing import pack_capsule

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "deploy" / "examples"
CAPSULES = EXAMPLES / "capsules"
REGISTRY = EXAMPLES / "registry"
Unpack = Callable[[str], Path]
NAMES = ["crasher", "echo", "orchestrator", "sleeper", "worker"]


def test_sources_are_the_expected_capsules() -> None:
    assert sorted(p.name for p in CAPSULES.iterdir() if p.is_dir()) == NAMES


def test_registry_holds_exactly_the_examples() -> None:
    files = sorted(p.relative_to(REGISTRY).as_posix() for p in REGISTRY.rglob("*") if p.is_file())
    expected = sorted(f"{n}/0.1.0/{n}-0.1.0.{ext}" for n in NAMES for ext in ("mur.zip", "sha256"))
    assert files == expected
    assert [(s.name, s.version) for s in Registry(REGISTRY).list()] == [(n, "0.1.0") for n in NAMES]
    assert Registry(REGISTRY).verify() == []


@pytest.mark.parametrize("name", NAMES)
def test_registry_matches_sources_byte_for_byte(name: str, tmp_path: Path) -> None:
    result = pack_capsule(CAPSULES / name, tmp_path)
    checked_in = REGISTRY / name / "0.1.0"
    assert result.path.read_bytes() == (checked_in / f"{name}-0.1.0.mur.zip").read_bytes(), (
        "deploy/examples/registry is stale: run `python deploy/examples/build.py`"
    )
    assert (result.path.parent / f"{name}-0.1.0.sha256").read_bytes() == (
        checked_in / f"{name}-0.1.0.sha256"
    ).read_bytes()


@pytest.mark.parametrize("name", NAMES)
def test_example_resolves_and_extracts_executable(name: str, tmp_path: Path) -> None:
    reg = Registry(REGISTRY)
    art = reg.resolve(name, "0.1.0")
    assert art.manifest.name == name and art.manifest.version == "0.1.0"
    assert art.manifest.entrypoint == ["main.py"]
    dest = tmp_path / "unpacked"
    reg.extract(art, dest)
    main_py = dest / "main.py"
    assert main_py.is_file()
    assert stat.S_IMODE(main_py.stat().st_mode) == 0o700
    assert main_py.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    assert stat.S_IMODE((dest / "murmur.yaml").stat().st_mode) == 0o600
    assert reg.members(art) == ["main.py", "murmur.yaml"]


def _manifest(name: str) -> Manifest:
    return Registry(REGISTRY).resolve(name, "0.1.0").manifest


def test_manifest_declarations() -> None:
    echo = _manifest("echo")
    assert echo.lifecycle.after_task == "sleep"
    assert echo.exports.peer_files is not None
    assert (echo.exports.peer_files.root, echo.exports.peer_files.max_ttl) == ("share", 900)
    assert echo.capabilities.network.allow == ["127.0.0.1", "localhost"]
    assert echo.capabilities.peer_fetch.allow == ["127.0.0.1", "localhost"]
    orch = _manifest("orchestrator")
    assert orch.capabilities.spawn.allow == ["worker"]
    assert orch.lifecycle.after_task == "exit"
    worker = _manifest("worker")
    assert worker.capabilities.spawn.allow == []
    assert worker.lifecycle.after_task == "exit"


def test_worker_fits_inside_orchestrator_envelope() -> None:
    """Every list axis of worker is a subset of orchestrator's; boolean axes never widen.

    Exact-string subsets are stricter than the envelope's coverage rules, so this holds
    whatever those rules' details.
    """
    parent, child = _manifest("orchestrator").capabilities, _manifest("worker").capabilities
    for axis in ("network", "peer_fetch", "shell", "spawn", "env"):
        assert set(getattr(child, axis).allow) <= set(getattr(parent, axis).allow), axis
    assert set(child.install.skill) <= set(parent.install.skill)
    assert set(child.install.tool) <= set(parent.install.tool)
    assert not child.network.unix_sockets or parent.network.unix_sockets
    assert not child.filesystem.workdir_exec or parent.filesystem.workdir_exec
    assert parent.filesystem.scope is None
    assert child.containment == parent.containment == "advisory"
    assert _manifest("worker").state_stores() <= _manifest("orchestrator").state_stores()


def test_worker_passes_the_real_envelope_check() -> None:
    parent = Envelope.from_manifest(_manifest("orchestrator"))
    assert violation(parent, Envelope.from_manifest(_manifest("worker"))) is None
    # and the other examples would not be admitted under orchestrator (its envelope is narrow)
    assert violation(parent, Envelope.from_manifest(_manifest("echo"))) is not None


# -- behaviour: run each unpacked entrypoint the way the host does ------------------------------


@pytest.fixture
def unpack(tmp_path: Path) -> Unpack:
    def _unpack(name: str) -> Path:
        reg = Registry(REGISTRY)
        dest = tmp_path / f"{name}-artifact"
        reg.extract(reg.resolve(name, "0.1.0"), dest)
        return dest / "main.py"

    return _unpack


def _env(extra_path: Path | None = None) -> dict[str, str]:
    path = [str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")]
    if extra_path is not None:
        path.insert(0, str(extra_path))
    return {
        "PATH": os.pathsep.join(path),
        "MURMUR_JOB_ID": "job_test",
        "MURMUR_SESSION_ID": "ses_test",
        "MURMUR_ROOST_URL": "http://127.0.0.1:1",
        "MURMUR_HOST_SOCKET": "/nonexistent",
    }


def _run(entry: Path, task: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(entry)], input=task, cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=30
    )


def test_echo(unpack: Unpack, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    p = _run(unpack("echo"), "hello world\n", work)
    assert (p.returncode, p.stdout) == (0, "echo: hello world\n")
    assert (work / "share" / "last-task.txt").read_text() == "hello world\n"


def test_worker(unpack: Unpack, tmp_path: Path) -> None:
    p = _run(unpack("worker"), "the quick brown fox", tmp_path)
    assert p.returncode == 0
    assert p.stdout == ("worker report\nwords: 4\nlines: 1\ncharacters: 19\nreversed: fox brown quick the\n")
    assert sorted(os.listdir(tmp_path)) == ["worker-artifact"]  # writes nothing but stdout


def test_crasher_exits_3(unpack: Unpack, tmp_path: Path) -> None:
    p = _run(unpack("crasher"), "please fail", tmp_path)
    assert p.returncode == 3
    assert "crasher: about to fail" in p.stderr


def test_crasher_signal(unpack: Unpack, tmp_path: Path) -> None:
    p = _run(unpack("crasher"), "die by signal", tmp_path)
    assert p.returncode == -signal.SIGSEGV
    assert "crasher: about to fail" in p.stderr


def _start_sleeper(entry: Path, task: str, cwd: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([str(entry)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd, env=_env(), text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(task)
    proc.stdin.close()
    line = proc.stdout.readline()
    assert line.startswith("sleeper: pid "), line
    return proc


def test_sleeper_stops_on_sigterm(unpack: Unpack, tmp_path: Path) -> None:
    proc = _start_sleeper(unpack("sleeper"), "sleep 600 please", tmp_path)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert time.monotonic() - t0 < 5


def test_sleeper_finishes(unpack: Unpack, tmp_path: Path) -> None:
    p = _run(unpack("sleeper"), "0.2", tmp_path)
    assert p.returncode == 0
    assert p.stdout.splitlines()[-1] == "sleeper: slept 0.2 seconds"


def test_stubborn_sleeper_needs_sigkill(unpack: Unpack, tmp_path: Path) -> None:
    proc = _start_sleeper(unpack("sleeper"), "be stubborn for 600", tmp_path)
    try:
        proc.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
    finally:
        proc.kill()
    assert proc.wait(timeout=10) == -signal.SIGKILL


def _fake_roost_capsule(bin_dir: Path, exit_code: int) -> None:
    bin_dir.mkdir()
    fake = bin_dir / "roost-capsule"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"if {exit_code}:\n"
        "    print('delegate: refused by the referee', file=sys.stderr)\n"
        f"    sys.exit({exit_code})\n"
        "print(json.dumps(sys.argv[1:]))\n"
    )
    fake.chmod(0o755)


def test_orchestrator_delegates_to_worker(unpack: Unpack, tmp_path: Path) -> None:
    _fake_roost_capsule(tmp_path / "bin", 0)
    p = _run(unpack("orchestrator"), "-n count these words\n", tmp_path, _env(tmp_path / "bin"))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == ["delegate", "worker@0.1.0", "--task=-n count these words", "--wait"]


def test_orchestrator_reports_failed_delegation(unpack: Unpack, tmp_path: Path) -> None:
    _fake_roost_capsule(tmp_path / "bin", 4)
    p = _run(unpack("orchestrator"), "work", tmp_path, _env(tmp_path / "bin"))
    assert p.returncode == 1
    assert "delegate: refused by the referee" in p.stderr
    assert "delegating to worker@0.1.0 failed (exit 4)" in p.stderr

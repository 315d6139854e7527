"""The checks a node keeper runs for ``roostctl doctor`` (roost/backends/ray/node/checks.py and the
artifact cache's status), on real commands and real files."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from roost import __version__
from roost.backends.ray.node.cache import cache_status, put_artifact
from roost.backends.ray.node.checks import check_command

PATH = os.environ.get("PATH", os.defpath)


def _script(tmp: Path, name: str, body: str, mode: int = 0o755) -> Path:
    path = tmp / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(mode)
    return path


def test_the_capsule_command_runs_with_version() -> None:
    found = check_command([sys.executable, "-m", "roost.capsule"], PATH, run_version=True)
    assert found["error"] is None, found
    assert found["found"] == sys.executable
    assert found["version"] == f"roost-capsule {__version__}"


def test_a_missing_or_unrunnable_command_says_why(tmp_path: Path) -> None:
    gone = check_command([str(tmp_path / "roost-capsule")], PATH, run_version=True)
    assert gone["error"] == f"{tmp_path / 'roost-capsule'} does not exist or is not executable on this node"
    flat = _script(tmp_path, "flat", "exit 0\n", mode=0o644)
    assert "does not exist or is not executable" in str(check_command([str(flat)], PATH, run_version=True)["error"])
    absent = check_command(["roost-capsule-nowhere"], str(tmp_path), run_version=True)
    assert absent["error"] == f"roost-capsule-nowhere is not on PATH ({tmp_path}) on this node"


def test_a_broken_command_gives_its_exit_status_and_last_stderr_line(tmp_path: Path) -> None:
    broken = _script(
        tmp_path, "roost-capsule", "echo 'Traceback...' >&2\necho 'ModuleNotFoundError: aiohttp' >&2\nexit 1\n"
    )
    found = check_command([str(broken)], PATH, run_version=True)
    assert found["found"] == str(broken)
    assert found["error"] == f"'{broken} --version' exited 1: ModuleNotFoundError: aiohttp"
    silent = _script(tmp_path, "silent", "exit 0\n")
    assert check_command([str(silent)], PATH, run_version=True)["error"] == f"'{silent} --version' exited 0: no output"


def test_a_bare_name_is_found_on_the_childrens_path_and_only_runs_when_asked(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    _script(tmp_path, "mur", f"touch {marker}\n")
    found = check_command(["mur", "run"], str(tmp_path), run_version=False)
    assert found == {"argv": ["mur", "run"], "found": str(tmp_path / "mur"), "version": None, "error": None}
    assert not marker.exists()


def test_the_cache_status_counts_and_names_damaged_entries(tmp_path: Path) -> None:
    cache = tmp_path / "registry"
    cache.mkdir()
    data = b"PK\x05\x06" + bytes(18)
    put_artifact(cache, "alpha", "1.0.0", hashlib.sha256(data).hexdigest(), data)
    put_artifact(cache, "beta", "2.0.0", hashlib.sha256(data).hexdigest(), data)
    status = cache_status(cache)
    assert status == {"dir": str(cache), "count": 2, "bytes": 2 * len(data), "writable": True, "mismatched": []}
    (cache / "beta" / "2.0.0" / "beta-2.0.0.mur.zip").write_bytes(b"changed")
    assert cache_status(cache)["mismatched"] == ["beta/2.0.0/beta-2.0.0.mur.zip"]
    assert cache_status(tmp_path / "none")["count"] == 0

"""deploy/roost.toml: it names every setting, it loads, and the quickstart's daemon starts from it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ops.support import REPO, daemon_env, roostctl, wait_for

from roost.cli import resolve_config
from roost.state.config import Config, load_toml

TOML = REPO / "deploy" / "roost.toml"


def test_every_setting_is_listed() -> None:
    named = set(re.findall(r"^#? ?([a-z_]+) = ", TOML.read_text(), flags=re.M))
    assert named == set(Config.model_fields)


def test_it_loads_with_paths_relative_to_the_file() -> None:
    values = load_toml(TOML)
    cfg = resolve_config({"__config__": str(TOML)})
    assert cfg.registry_path == (REPO / "deploy" / "examples" / "registry").resolve()
    assert cfg.state_dir == (REPO / "deploy" / "state").resolve()
    assert "orchestrator" in cfg.spawn_allow and "worker" not in cfg.spawn_allow
    assert values["port"] == 7700


def test_the_quickstart_daemon_starts(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "roost", "--config", str(TOML), "--port", "0", "--state-dir", str(state)],
        env=daemon_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: roostctl("status", state_dir=state).code == 0, timeout=30, interval=0.1)
        doc = roostctl("registry", "ls", "--json", state_dir=state).json
        assert {a["name"] for a in doc["artifacts"]} >= {"orchestrator", "worker", "echo"}
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0

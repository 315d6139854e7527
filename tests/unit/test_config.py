"""Configuration: TOML paths resolve against the file, flags win, one sentence on errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.cli import UsageError, parse_args, resolve_config
from roost.state.config import ConfigError, default_max_live_capsules


def test_toml_relative_paths_and_flag_precedence(tmp_path: Path) -> None:
    cfg = tmp_path / "etc" / "roost.toml"
    cfg.parent.mkdir()
    cfg.write_text('[roost]\nregistry_path = "reg"\nstate_dir = "st"\nmax_depth = 2\nspawn-allow = ["a"]\n')
    _, values = parse_args(["--config", str(cfg), "--max-depth=1", "--spawn-allow", "b"])
    c = resolve_config(values)
    assert c.registry_path == (cfg.parent / "reg").resolve()
    assert c.state_dir == (cfg.parent / "st").resolve()
    assert c.max_depth == 1 and c.spawn_allow == ("b",)


def test_remote_bind_needs_allow_remote(tmp_path: Path) -> None:
    base = ["--state-dir", str(tmp_path), "--registry-path", str(tmp_path)]
    with pytest.raises(ConfigError, match="--allow-remote"):
        resolve_config(parse_args([*base, "--bind", "192.0.2.1"])[1])
    assert resolve_config(parse_args([*base, "--bind", "192.0.2.1", "--allow-remote"])[1]).bind == "192.0.2.1"
    assert resolve_config(parse_args([*base, "--bind", "::1"])[1]).is_loopback_bind()


def test_usage_errors() -> None:
    with pytest.raises(UsageError, match="unknown argument: -x"):
        parse_args(["-x"])
    with pytest.raises(UsageError, match="--spawn-allow requires a value"):
        parse_args(["--spawn-allow"])
    assert parse_args(["--version", "--bogus"]) == ("version", {})


def test_default_ceiling_is_clamped() -> None:
    assert 16 <= default_max_live_capsules() <= 256


def test_state_directory_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path / "sd"))
    c = resolve_config(parse_args(["--registry-path", str(tmp_path)])[1])
    assert c.state_dir == tmp_path / "sd"
    assert c.admin_socket_path == tmp_path / "sd" / "admin.sock"

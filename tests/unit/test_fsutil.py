"""Atomic writes leave the old bytes or the new, never a temp file or a followed link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roost.system.fsutil import write_atomic


def test_replaces_with_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    target.write_text("old")
    write_atomic(target, b"new", mode=0o644)
    assert target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_a_planted_link_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("secret")
    target = tmp_path / "f"
    target.symlink_to(outside)
    write_atomic(target, b"mine")
    assert outside.read_text() == "secret"
    assert not target.is_symlink() and target.read_bytes() == b"mine"


def test_failure_removes_the_temp_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "f"
    with pytest.raises(FileNotFoundError):
        write_atomic(missing, b"x")
    target = tmp_path / "dir-target"
    target.mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomic(target, b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir-target"]
    assert os.listdir(target) == []


def test_exclusive_creates_once_and_never_replaces(tmp_path: Path) -> None:
    target = tmp_path / "key"
    write_atomic(target, b"first", exclusive=True)
    assert target.read_bytes() == b"first"
    with pytest.raises(FileExistsError):
        write_atomic(target, b"second", exclusive=True)
    assert target.read_bytes() == b"first"
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        write_atomic(dangling, b"x", exclusive=True)
    assert not (tmp_path / "elsewhere").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "key"]

"""A sealed root's read-only part (roost/capsule/binds.py) and interpreter resolution
(roost/capsule/interpreters.py), on real files: links recreated, real files bound, shims asked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roost.capsule.binds import readonly_binds
from roost.capsule.interpreters import Unrunnable, resolve, shim_manager


def _pairs(args: list[str]) -> list[tuple[str, str, str]]:
    return [(args[i], args[i + 1], args[i + 2]) for i in range(0, len(args), 3)]


def test_a_link_is_recreated_and_its_target_bound(tmp_path: Path) -> None:
    real = tmp_path / "tree" / "bin"
    real.mkdir(parents=True)
    (real / "python3.11").write_text("x")
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python3").symlink_to(real / "python3.11")
    args = _pairs(readonly_binds([str(venv / "python3")]))
    assert ("--symlink", str(real / "python3.11"), str(venv / "python3")) in args
    assert ("--ro-bind-try", str(real / "python3.11"), str(real / "python3.11")) in args
    assert not [a for a in args if a[0] == "--ro-bind-try" and a[2] == str(venv / "python3")]


def test_what_lies_inside_a_bound_directory_is_not_bound_again(tmp_path: Path) -> None:
    d = tmp_path / "lib"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "f").write_text("x")
    (d / "link").symlink_to(d / "sub" / "f")
    args = _pairs(readonly_binds([str(d / "sub" / "f"), str(d), str(d / "link"), "/proc/self", "/dev/null"]))
    assert args == [("--ro-bind-try", str(d), str(d))]


def test_a_directory_link_on_the_way_is_recreated(tmp_path: Path) -> None:
    (tmp_path / "usr" / "lib64").mkdir(parents=True)
    (tmp_path / "usr" / "lib64" / "ld.so").write_text("x")
    (tmp_path / "lib64").symlink_to("usr/lib64")
    args = _pairs(readonly_binds([str(tmp_path / "lib64" / "ld.so")]))
    assert ("--symlink", "usr/lib64", str(tmp_path / "lib64")) in args
    assert ("--ro-bind-try", *([str(tmp_path / "usr" / "lib64" / "ld.so")] * 2)) in args


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_shim_is_asked_for_its_real_program(tmp_path: Path) -> None:
    real = tmp_path / "versions" / "9.9" / "bin"
    real.mkdir(parents=True)
    target = _script(real / "tool", "#!/bin/sh\necho real\n")
    (tmp_path / "versions" / "9.9" / "lib").mkdir()
    manager = _script(tmp_path / "manager", f'#!/bin/sh\n[ "$1" = which ] && echo "{target}"\n')
    shims = tmp_path / "shims"
    shims.mkdir()
    shim = _script(
        shims / "tool", f'#!/usr/bin/env bash\nexport TOOL_ROOT="{tmp_path}"\nexec "{manager}" exec "tool" "$@"\n'
    )
    assert shim_manager(str(shim)) == (str(manager), {"TOOL_ROOT": str(tmp_path)})
    got = resolve("tool", str(shims), os.environ)
    assert got is not None and got.run == str(target) and got.via == str(shim)
    assert str(target) in got.exec_files and "/bin/sh" in got.exec_files  # the target and its #! interpreter
    assert str(manager) not in got.exec_files and str(shim) not in got.exec_files  # never the manager's scripts
    assert got.read == [str(tmp_path / "versions" / "9.9" / "lib")]


def test_a_shim_nothing_can_ask_is_unrunnable(tmp_path: Path) -> None:
    shim = _script(tmp_path / "tool", '#!/bin/sh\nexec "$HOME/.x/libexec/mgr" exec "$0" "$@"\n')
    with pytest.raises(Unrunnable) as caught:
        resolve(str(shim), "/usr/bin")
    assert caught.value.path == str(shim)


def test_a_venv_interpreter_reads_its_venv_and_runs_through_its_link(tmp_path: Path) -> None:
    base = tmp_path / "py" / "bin"
    base.mkdir(parents=True)
    (tmp_path / "py" / "lib").mkdir()
    binary = _script(base / "python3.11", "#!/bin/sh\n")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base}\n")
    (venv / "lib").mkdir()
    (venv / "bin" / "python3").symlink_to(binary)
    got = resolve(str(venv / "bin" / "python3"), "/usr/bin")
    assert got is not None and got.run == str(venv / "bin" / "python3") and got.via is None
    assert str(binary) in got.exec_files
    assert str(venv / "pyvenv.cfg") in got.read and str(venv / "lib") in got.read
    assert str(tmp_path / "py" / "lib") in got.read
    # Not the venv's root nor its bin: a program there would be readable, so the loader could run it.
    assert not [r for r in got.read if r in (str(venv), str(venv / "bin"))]

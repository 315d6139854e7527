"""Packer: deterministic zips, atomic writes, sidecars, refusals; packed capsules resolve."""

from __future__ import annotations

import hashlib
import os
import stat
import zipfile
from pathlib import Path

import pytest

from roost.state.registry import Registry
from roost.state.registry.packing import FIXED_DATE_TIME, PackError, main, pack_capsule


def make_src(tmp_path: Path, name: str = "demo", *, entrypoint: str = '["main.py"]') -> Path:
    src = tmp_path / f"src-{name}"
    src.mkdir()
    (src / "murmur.yaml").write_text(f"name: {name}\nversion: 0.1.0\nentrypoint: {entrypoint}\n")
    main_py = src / "main.py"
    main_py.write_text("#!/usr/bin/env python3\nprint('hi')\n")
    main_py.chmod(0o755)
    (src / "lib").mkdir()
    (src / "lib" / "util.py").write_text("X = 1\n")
    return src


def test_pack_layout_sidecar_and_resolve(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    reg_root = tmp_path / "reg"
    result = pack_capsule(src, reg_root)
    zpath = reg_root / "demo" / "0.1.0" / "demo-0.1.0.mur.zip"
    assert result.path == zpath and result.name == "demo" and result.version == "0.1.0"
    assert result.sha256 == hashlib.sha256(zpath.read_bytes()).hexdigest()
    sidecar = (zpath.parent / "demo-0.1.0.sha256").read_text()
    assert sidecar == f"{result.sha256}  demo-0.1.0.mur.zip\n"
    art = Registry(reg_root).resolve("demo", "0.1.0")
    assert art.sha256 == result.sha256
    assert sorted(p.name for p in zpath.parent.iterdir()) == ["demo-0.1.0.mur.zip", "demo-0.1.0.sha256"]


def test_zip_entries_are_normalised(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    (src / "lib" / "util.py").chmod(0o600)
    result = pack_capsule(src, tmp_path / "reg")
    with zipfile.ZipFile(result.path) as zf:
        infos = zf.infolist()
        assert [i.filename for i in infos] == ["lib/util.py", "main.py", "murmur.yaml"]
        for i in infos:
            assert i.date_time == FIXED_DATE_TIME
            assert i.compress_type == zipfile.ZIP_DEFLATED
            assert i.create_system == 3
        modes = {i.filename: i.external_attr >> 16 for i in infos}
    assert modes == {
        "lib/util.py": stat.S_IFREG | 0o644,
        "main.py": stat.S_IFREG | 0o755,
        "murmur.yaml": stat.S_IFREG | 0o644,
    }


def test_packing_is_deterministic(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    a = pack_capsule(src, tmp_path / "a")
    bytes_a = a.path.read_bytes()
    # Different mtimes, a different creation order and different permission noise: same bytes.
    os.utime(src / "main.py", (1_700_000_000, 1_700_000_000))
    util = src / "lib" / "util.py"
    data = util.read_bytes()
    util.unlink()
    util.write_bytes(data)
    util.chmod(0o664)
    b = pack_capsule(src, tmp_path / "b")
    assert b.path.read_bytes() == bytes_a
    assert a.sha256 == b.sha256


def test_repack_unchanged_reports_unchanged(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    reg_root = tmp_path / "reg"
    first = pack_capsule(src, reg_root)
    ino = first.path.stat().st_ino
    second = pack_capsule(src, reg_root)
    assert first.changed and not second.changed
    assert second.path.stat().st_ino == ino  # not rewritten: the registry's cache stays warm


def test_repack_changed_replaces_atomically(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    reg_root = tmp_path / "reg"
    first = pack_capsule(src, reg_root)
    (src / "lib" / "util.py").write_text("X = 2\n")
    second = pack_capsule(src, reg_root)
    assert second.changed and second.sha256 != first.sha256
    assert Registry(reg_root).resolve("demo", "0.1.0").sha256 == second.sha256
    assert not [p for p in first.path.parent.iterdir() if p.name.startswith(".")]


def test_skips_noise(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"x")
    (src / "lib" / "util.pyc").write_bytes(b"x")
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref")
    (src / ".env").write_text("SECRET=1")
    result = pack_capsule(src, tmp_path / "reg")
    with zipfile.ZipFile(result.path) as zf:
        assert zf.namelist() == ["lib/util.py", "main.py", "murmur.yaml"]


def test_missing_manifest(tmp_path: Path) -> None:
    src = tmp_path / "empty"
    src.mkdir()
    with pytest.raises(PackError, match=r"has no murmur.yaml"):
        pack_capsule(src, tmp_path / "reg")


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(PackError, match=r"is not a directory"):
        pack_capsule(tmp_path / "nope", tmp_path / "reg")


def test_bad_manifest(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    (src / "murmur.yaml").write_text("name: Demo!\nversion: 0.1.0\n")
    with pytest.raises(PackError, match=r"name: must be lowercase"):
        pack_capsule(src, tmp_path / "reg")


def test_entrypoint_must_exist_and_be_executable(tmp_path: Path) -> None:
    src = make_src(tmp_path, entrypoint='["run.sh"]')
    with pytest.raises(PackError, match=r"entrypoint 'run.sh' is not a file of the capsule"):
        pack_capsule(src, tmp_path / "reg")
    (src / "run.sh").write_text("#!/bin/sh\n")
    with pytest.raises(PackError, match=r"not executable"):
        pack_capsule(src, tmp_path / "reg")
    (src / "run.sh").chmod(0o755)
    pack_capsule(src, tmp_path / "reg")


def test_entrypoint_escaping_the_capsule_refused(tmp_path: Path) -> None:
    src = make_src(tmp_path, entrypoint='["../main.py"]')
    with pytest.raises(PackError, match=r"inside the capsule directory"):
        pack_capsule(src, tmp_path / "reg")


def test_absolute_entrypoint_needs_no_file(tmp_path: Path) -> None:
    src = make_src(tmp_path, entrypoint='["/bin/sh", "-c", "true"]')
    pack_capsule(src, tmp_path / "reg")


def test_entrypoint_in_subdirectory(tmp_path: Path) -> None:
    src = make_src(tmp_path, entrypoint='["./lib/util.py"]')
    (src / "lib" / "util.py").chmod(0o755)
    pack_capsule(src, tmp_path / "reg")


def test_symlink_in_source_refused(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    (tmp_path / "secret").write_text("s")
    os.symlink(tmp_path / "secret", src / "leak")
    with pytest.raises(PackError, match=r"is not a regular file"):
        pack_capsule(src, tmp_path / "reg")


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_src(tmp_path, "alpha")
    b = make_src(tmp_path, "beta")
    reg_root = tmp_path / "reg"
    assert main([str(a), str(b), "--registry", str(reg_root)]) == 0
    out = capsys.readouterr().out.splitlines()
    digests = [Registry(reg_root).resolve(n, "0.1.0").sha256 for n in ("alpha", "beta")]
    assert out == [f"alpha@0.1.0 {digests[0]}", f"beta@0.1.0 {digests[1]}"]


def test_cli_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing"), "--registry", str(tmp_path / "reg")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a directory" in err
    with pytest.raises(SystemExit) as ei:
        main([str(tmp_path)])  # --registry missing: argparse's own exit 2
    assert ei.value.code == 2

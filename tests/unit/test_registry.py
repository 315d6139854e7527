"""Registry: resolution, sidecars, hardening and the resolve cache, over real zips on disk."""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import time
import zipfile
from pathlib import Path

import pytest

from roost.core.errors import Internal
from roost.state.registry import (
    ArtifactNotFound,
    ManifestExtractionError,
    ManifestParseError,
    Registry,
    RegistryError,
    safe_member_parts,
)

MANIFEST = b"name: demo\nversion: 0.1.0\nentrypoint: [main.py]\n"


def write_zip(
    root: Path,
    name: str = "demo",
    version: str = "0.1.0",
    entries: list[tuple[str, bytes, int]] | None = None,
    *,
    sidecar: str | None = "auto",
) -> Path:
    """A zip at the upstream path; entries are (arcname, data, unix mode incl. type bits)."""
    if entries is None:
        entries = [("murmur.yaml", MANIFEST, 0o100644), ("main.py", b"#!/bin/sh\necho hi\n", 0o100755)]
    d = root / name / version
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}-{version}.mur.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data, mode in entries:
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.create_system = 3
            info.external_attr = mode << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    if sidecar == "auto":
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        (d / f"{name}-{version}.sha256").write_text(f"{digest}  {path.name}\n")
    elif sidecar is not None:
        (d / f"{name}-{version}.sha256").write_text(sidecar)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "registry"
    r.mkdir()
    return r


# -- resolve ---------------------------------------------------------------------------------


def test_resolve_ok(root: Path) -> None:
    path = write_zip(root)
    art = Registry(root).resolve("demo", "0.1.0")
    assert art.name == "demo" and art.version == "0.1.0"
    assert art.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert art.path == path
    assert art.manifest.entrypoint == ["main.py"]
    assert art.coordinates == "demo@0.1.0"


def test_resolve_without_sidecar_is_fine(root: Path) -> None:
    write_zip(root, sidecar=None)
    assert Registry(root).resolve("demo", "0.1.0").sha256


def test_sidecar_bare_digest_and_uppercase_accepted(root: Path) -> None:
    path = write_zip(root, sidecar=None)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    (path.parent / "demo-0.1.0.sha256").write_text(digest.upper())
    assert Registry(root).resolve("demo", "0.1.0").sha256 == digest


def test_sidecar_mismatch(root: Path) -> None:
    write_zip(root, sidecar="0" * 64 + "  demo-0.1.0.mur.zip\n")
    with pytest.raises(RegistryError) as ei:
        Registry(root).resolve("demo", "0.1.0")
    msg = str(ei.value)
    assert msg.startswith("registry error for 'demo/0.1.0': sha256 sidecar does not match the artifact")
    assert isinstance(ei.value, Internal) and ei.value.status == 500
    assert ei.value.body() == {"error": msg}


def test_sidecar_garbage(root: Path) -> None:
    write_zip(root, sidecar="not a digest\n")
    with pytest.raises(RegistryError, match=r"does not hold a sha256 hex digest"):
        Registry(root).resolve("demo", "0.1.0")


def test_missing_artifact(root: Path) -> None:
    with pytest.raises(ArtifactNotFound) as ei:
        Registry(root).resolve("demo", "0.1.0")
    assert str(ei.value) == (
        f"registry error for 'demo/0.1.0': no artifact at {root / 'demo/0.1.0/demo-0.1.0.mur.zip'}"
    )
    (root / "demo" / "0.1.0").mkdir(parents=True)
    with pytest.raises(ArtifactNotFound, match=r"no artifact at"):
        Registry(root).resolve("demo", "0.1.0")


def test_missing_registry_root(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match=r"^registry error for 'demo/0.1.0': "):
        Registry(tmp_path / "nope").resolve("demo", "0.1.0")


def test_manifest_missing(root: Path) -> None:
    write_zip(root, entries=[("main.py", b"x", 0o100755)])
    with pytest.raises(ManifestExtractionError) as ei:
        Registry(root).resolve("demo", "0.1.0")
    assert str(ei.value) == ("manifest extraction failed: 'demo@0.1.0' has no murmur.yaml at the top of its artifact")
    assert isinstance(ei.value, RegistryError)


@pytest.mark.parametrize(
    ("entry", "error", "match"),
    [
        (("sub/murmur.yaml", MANIFEST), ManifestExtractionError, None),
        (
            ("murmur.yaml", b"name: demo\nversion: 0.1.0\nentrypoint: 'sh -c x'\n"),
            ManifestParseError,
            r"entrypoint: must be a list",
        ),
    ],
    ids=["in_subdirectory_does_not_count", "invalid_model"],
)
def test_manifest_refused(root: Path, entry: tuple[str, bytes], error: type[RegistryError], match: str | None) -> None:
    write_zip(root, entries=[(*entry, 0o100644)])
    with pytest.raises(error, match=match):
        Registry(root).resolve("demo", "0.1.0")


def test_duplicate_manifest_refused(root: Path) -> None:
    with pytest.warns(UserWarning, match=r"Duplicate name"):
        write_zip(root, entries=[("murmur.yaml", MANIFEST, 0o100644), ("murmur.yaml", MANIFEST, 0o100644)])
    with pytest.raises(ManifestExtractionError, match=r"more than one murmur.yaml"):
        Registry(root).resolve("demo", "0.1.0")


def test_not_a_zip(root: Path) -> None:
    d = root / "demo" / "0.1.0"
    d.mkdir(parents=True)
    (d / "demo-0.1.0.mur.zip").write_bytes(b"this is not a zip file at all")
    with pytest.raises(ManifestExtractionError, match=r"^manifest extraction failed: .* is not a readable zip"):
        Registry(root).resolve("demo", "0.1.0")


def test_manifest_not_yaml(root: Path) -> None:
    write_zip(root, entries=[("murmur.yaml", b"name: [unclosed\n  : : :", 0o100644)])
    with pytest.raises(ManifestParseError) as ei:
        Registry(root).resolve("demo", "0.1.0")
    assert str(ei.value).startswith("manifest parse error: murmur.yaml of 'demo@0.1.0': ")
    assert "not valid YAML" in str(ei.value)
    assert "\n" not in str(ei.value)


def test_coordinates_mismatch(root: Path) -> None:
    write_zip(root, entries=[("murmur.yaml", b"name: other\nversion: 0.2.0\n", 0o100644)])
    with pytest.raises(RegistryError) as ei:
        Registry(root).resolve("demo", "0.1.0")
    assert type(ei.value) is RegistryError
    assert str(ei.value) == (
        "registry error for 'demo/0.1.0': the artifact's murmur.yaml declares 'other@0.2.0', "
        "not the coordinates it is published under"
    )


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("../etc", "0.1.0"),
        ("a/b", "0.1.0"),
        ("..", "0.1.0"),
        ("demo", ".."),
        ("demo", "0.1.0/../../x"),
        ("demo\x00", "0.1.0"),
        ("Demo", "0.1.0"),
        ("", "0.1.0"),
        ("demo", ""),
        (".hidden", "0.1.0"),
    ],
)
def test_unsafe_coordinates_refused_before_filesystem(
    tmp_path: Path, name: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    touched: list[object] = []
    real_open = os.open

    def spy(*a: object, **k: object) -> int:
        touched.append(a[0])
        return real_open(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", spy)
    with pytest.raises(RegistryError) as ei:
        Registry(tmp_path).resolve(name, version)
    assert touched == []
    assert "\x00" not in str(ei.value)
    assert str(ei.value).startswith("registry error for '")


def test_symlinked_version_dir_not_followed(tmp_path: Path, root: Path) -> None:
    outside = tmp_path / "outside"
    write_zip(outside)  # a perfectly valid artifact, but outside the root
    (root / "demo").mkdir()
    os.symlink(outside / "demo" / "0.1.0", root / "demo" / "0.1.0")
    with pytest.raises(RegistryError, match=r"registry follows no links|never follows"):
        Registry(root).resolve("demo", "0.1.0")


def test_symlinked_name_dir_not_followed(tmp_path: Path, root: Path) -> None:
    outside = tmp_path / "outside"
    write_zip(outside)
    os.symlink(outside / "demo", root / "demo")
    with pytest.raises(RegistryError):
        Registry(root).resolve("demo", "0.1.0")


def test_symlinked_zip_not_followed(tmp_path: Path, root: Path) -> None:
    real = write_zip(tmp_path / "outside")
    d = root / "demo" / "0.1.0"
    d.mkdir(parents=True)
    os.symlink(real, d / "demo-0.1.0.mur.zip")
    with pytest.raises(RegistryError, match=r"symbolic link, which the registry never follows"):
        Registry(root).resolve("demo", "0.1.0")


def test_symlinked_registry_root_is_allowed(tmp_path: Path, root: Path) -> None:
    write_zip(root)
    link = tmp_path / "link"
    os.symlink(root, link)
    assert Registry(link).resolve("demo", "0.1.0").name == "demo"


# -- decompression ceilings ------------------------------------------------------------------


def test_manifest_beyond_ceiling_refused(root: Path) -> None:
    big = MANIFEST + b"#" + b"x" * (2 * 1024 * 1024) + b"\n"
    path = write_zip(root, entries=[("murmur.yaml", big, 0o100644)])
    assert path.stat().st_size < 64 * 1024  # highly compressible: a small zip, a large manifest
    with pytest.raises(ManifestExtractionError, match=r"larger than the 1 MiB ceiling"):
        Registry(root).resolve("demo", "0.1.0")


def _patch_sizes(path: Path, arcname: str, fake_size: int) -> None:
    """Rewrite the declared uncompressed size of ``arcname`` in both the local and central header."""
    data = bytearray(path.read_bytes())
    name = arcname.encode()
    # Local file header: signature PK\x03\x04, uncompressed size at offset 22.
    pos = 0
    while (pos := data.find(b"PK\x03\x04", pos)) != -1:
        (nlen,) = struct.unpack_from("<H", data, pos + 26)
        if bytes(data[pos + 30 : pos + 30 + nlen]) == name:
            struct.pack_into("<I", data, pos + 22, fake_size)
        pos += 4
    # Central directory header: signature PK\x01\x02, uncompressed size at offset 24.
    pos = 0
    while (pos := data.find(b"PK\x01\x02", pos)) != -1:
        (nlen,) = struct.unpack_from("<H", data, pos + 28)
        if bytes(data[pos + 46 : pos + 46 + nlen]) == name:
            struct.pack_into("<I", data, pos + 24, fake_size)
        pos += 4
    path.write_bytes(bytes(data))


def test_manifest_bomb_with_lying_header_refused(root: Path) -> None:
    big = MANIFEST + b"#" + b"x" * (4 * 1024 * 1024) + b"\n"
    path = write_zip(root, entries=[("murmur.yaml", big, 0o100644)], sidecar=None)
    _patch_sizes(path, "murmur.yaml", 100)
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo("murmur.yaml").file_size == 100  # the header now lies
    with pytest.raises(ManifestExtractionError) as ei:
        Registry(root).resolve("demo", "0.1.0")
    assert str(ei.value).startswith("manifest extraction failed: ")


def test_manifest_ceiling_counts_actual_bytes(root: Path) -> None:
    """With the header claiming a small size, the ceiling still trips on what is decompressed."""
    big = MANIFEST + b"#" + b"x" * 5000 + b"\n"
    path = write_zip(root, entries=[("murmur.yaml", big, 0o100644)], sidecar=None)
    _patch_sizes(path, "murmur.yaml", 10)
    with pytest.raises(ManifestExtractionError):
        Registry(root, max_manifest_bytes=1000).resolve("demo", "0.1.0")


def test_extract_total_ceiling(root: Path, tmp_path: Path) -> None:
    entries = [
        ("murmur.yaml", MANIFEST, 0o100644),
        ("a.bin", b"\0" * 6000, 0o100644),
        ("b.bin", b"\0" * 6000, 0o100644),
    ]
    write_zip(root, entries=entries)
    reg = Registry(root, max_extract_bytes=10_000)
    art = reg.resolve("demo", "0.1.0")
    with pytest.raises(RegistryError, match=r"unpacks to more than the 10000 bytes ceiling"):
        reg.extract(art, tmp_path / "out")


def test_extract_ceiling_counts_actual_bytes(root: Path, tmp_path: Path) -> None:
    entries = [("murmur.yaml", MANIFEST, 0o100644), ("a.bin", b"\0" * 50_000, 0o100644)]
    path = write_zip(root, entries=entries, sidecar=None)
    _patch_sizes(path, "a.bin", 10)
    reg = Registry(root, max_extract_bytes=20_000)
    art = reg.resolve("demo", "0.1.0")
    out = tmp_path / "out"
    with pytest.raises(RegistryError):
        reg.extract(art, out)
    assert not (out / "a.bin").exists() or (out / "a.bin").stat().st_size <= 20_000


def test_extract_entry_ceiling(root: Path, tmp_path: Path) -> None:
    entries = [("murmur.yaml", MANIFEST, 0o100644)] + [(f"f{i}", b"", 0o100644) for i in range(20)]
    write_zip(root, entries=entries)
    reg = Registry(root, max_extract_entries=10)
    art = reg.resolve("demo", "0.1.0")
    out = tmp_path / "out"
    with pytest.raises(RegistryError, match=r"21 entries, more than the 10 ceiling"):
        reg.extract(art, out)
    assert not out.exists()


# -- extract -----------------------------------------------------------------------------------


def test_extract_modes_and_content(root: Path, tmp_path: Path) -> None:
    entries = [
        ("murmur.yaml", MANIFEST, 0o100644),
        ("main.py", b"#!/bin/sh\n", 0o100755),
        ("lib/data.txt", b"data", 0o100666),
        ("emptydir/", b"", 0o040755),
    ]
    write_zip(root, entries=entries)
    reg = Registry(root)
    art = reg.resolve("demo", "0.1.0")
    out = tmp_path / "out"
    reg.extract(art, out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert stat.S_IMODE((out / "main.py").stat().st_mode) == 0o700
    assert stat.S_IMODE((out / "murmur.yaml").stat().st_mode) == 0o600
    assert stat.S_IMODE((out / "lib").stat().st_mode) == 0o700
    assert stat.S_IMODE((out / "lib" / "data.txt").stat().st_mode) == 0o600
    assert (out / "lib" / "data.txt").read_bytes() == b"data"
    assert (out / "emptydir").is_dir()
    assert reg.members(art) == ["lib/data.txt", "main.py", "murmur.yaml"]


def test_extract_ignores_traversal_and_absolute_entries(root: Path, tmp_path: Path) -> None:
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    entries = [
        ("murmur.yaml", MANIFEST, 0o100644),
        ("../escape.txt", b"bad", 0o100644),
        ("a/../../escape2.txt", b"bad", 0o100644),
        ("/abs.txt", b"bad", 0o100644),
        (str(victim_dir / "abs2.txt"), b"bad", 0o100644),
        ("dir\\..\\..\\win.txt", b"bad", 0o100644),
        ("ok/./fine.txt", b"ok", 0o100644),
    ]
    write_zip(root, entries=entries)
    reg = Registry(root)
    art = reg.resolve("demo", "0.1.0")
    out = tmp_path / "a" / "b"
    out.parent.mkdir()
    reg.extract(art, out)
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert [w for w in written if not w.startswith("registry/")] == ["a/b/murmur.yaml", "a/b/ok/fine.txt"]
    assert list(victim_dir.iterdir()) == []
    assert reg.members(art) == ["murmur.yaml", "ok/fine.txt"]


def test_extract_skips_symlink_entries(root: Path, tmp_path: Path) -> None:
    entries = [
        ("murmur.yaml", MANIFEST, 0o100644),
        ("link", b"/etc/passwd", 0o120777),
        ("link/through.txt", b"x", 0o100644),
    ]
    write_zip(root, entries=entries)
    reg = Registry(root)
    art = reg.resolve("demo", "0.1.0")
    out = tmp_path / "out"
    reg.extract(art, out)
    assert not (out / "link").is_symlink()
    assert (out / "link").is_dir()  # only the file entry under it materialised, as a real dir
    assert (out / "link" / "through.txt").read_bytes() == b"x"


def test_extract_refuses_pre_existing_symlink(root: Path, tmp_path: Path) -> None:
    entries = [("murmur.yaml", MANIFEST, 0o100644), ("sub/file.txt", b"x", 0o100644), ("top.txt", b"y", 0o100644)]
    write_zip(root, entries=entries)
    reg = Registry(root)
    art = reg.resolve("demo", "0.1.0")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(elsewhere, out / "sub")
    with pytest.raises(RegistryError, match=r"refusing to unpack through 'sub'"):
        reg.extract(art, out)
    assert list(elsewhere.iterdir()) == []

    out2 = tmp_path / "out2"
    out2.mkdir()
    target = tmp_path / "target.txt"
    target.write_text("keep")
    os.symlink(target, out2 / "top.txt")
    with pytest.raises(RegistryError, match=r"refusing to unpack over 'top.txt'"):
        reg.extract(art, out2)
    assert target.read_text() == "keep"


def test_extract_into_symlinked_dest_refused(root: Path, tmp_path: Path) -> None:
    write_zip(root)
    reg = Registry(root)
    art = reg.resolve("demo", "0.1.0")
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "dest")
    with pytest.raises(RegistryError, match=r"cannot open the unpack directory"):
        reg.extract(art, tmp_path / "dest")
    assert list(real.iterdir()) == []


def test_extract_does_not_write_through_hard_link(root: Path, tmp_path: Path) -> None:
    write_zip(root)
    reg = Registry(root)
    art = reg.resolve("demo", "0.1.0")
    out = tmp_path / "out"
    out.mkdir()
    precious = tmp_path / "precious"
    precious.write_text("keep")
    os.link(precious, out / "main.py")
    reg.extract(art, out)
    assert precious.read_text() == "keep"
    assert (out / "main.py").read_bytes() == b"#!/bin/sh\necho hi\n"


def test_extract_refuses_swapped_bytes(root: Path, tmp_path: Path) -> None:
    write_zip(root, sidecar=None)
    reg = Registry(root)
    art = reg.resolve("demo", "0.1.0")
    write_zip(root, entries=[("murmur.yaml", MANIFEST + b"# changed\n", 0o100644)], sidecar=None)
    with pytest.raises(RegistryError, match=r"changed since it was resolved"):
        reg.extract(art, tmp_path / "out")
    assert not (tmp_path / "out").exists()


# -- cache -------------------------------------------------------------------------------------


def test_cache_hit_does_not_rehash(root: Path) -> None:
    write_zip(root)
    reg = Registry(root)
    first = reg.resolve("demo", "0.1.0")
    for _ in range(50):
        assert reg.resolve("demo", "0.1.0") is first
    info = reg.cache_info()
    assert info.hashes == 1
    assert info.hits == 50 and info.misses == 1


def test_replacing_the_zip_misses_the_cache(root: Path) -> None:
    write_zip(root, sidecar=None)
    reg = Registry(root)
    first = reg.resolve("demo", "0.1.0")
    write_zip(root, entries=[("murmur.yaml", MANIFEST + b"# v2\n", 0o100644)], sidecar=None)
    second = reg.resolve("demo", "0.1.0")
    assert second.sha256 != first.sha256
    assert reg.cache_info().hashes == 2


def test_in_place_rewrite_same_size_misses_the_cache(root: Path) -> None:
    path = write_zip(root, sidecar=None)
    reg = Registry(root)
    first = reg.resolve("demo", "0.1.0")
    # Same length, same mtime restored: ctime still moves, so the cache must miss.
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0  # identical bytes, but a real write
    time.sleep(0.01)
    with open(path, "r+b") as f:
        f.write(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    reg.resolve("demo", "0.1.0")
    assert reg.cache_info().hashes == 2
    assert reg.resolve("demo", "0.1.0").sha256 == first.sha256


def test_adding_a_bad_sidecar_misses_the_cache(root: Path) -> None:
    path = write_zip(root, sidecar=None)
    reg = Registry(root)
    reg.resolve("demo", "0.1.0")
    (path.parent / "demo-0.1.0.sha256").write_text("f" * 64 + "\n")
    with pytest.raises(RegistryError, match=r"sidecar does not match"):
        reg.resolve("demo", "0.1.0")


def test_failures_are_cached_too(root: Path) -> None:
    write_zip(root, entries=[("murmur.yaml", b"name: other\nversion: 0.1.0\n", 0o100644)])
    reg = Registry(root)
    msgs = set()
    for _ in range(5):
        with pytest.raises(RegistryError) as ei:
            reg.resolve("demo", "0.1.0")
        msgs.add(str(ei.value))
    assert len(msgs) == 1
    assert reg.cache_info().hashes == 1


def test_cached_resolve_is_fast(root: Path) -> None:
    write_zip(root, entries=[("murmur.yaml", MANIFEST, 0o100644), ("blob", os.urandom(2 * 1024 * 1024), 0o100644)])
    reg = Registry(root)
    reg.resolve("demo", "0.1.0")
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        reg.resolve("demo", "0.1.0")
    per_call = (time.perf_counter() - t0) / n
    assert reg.cache_info().hashes == 1
    assert per_call < 0.001, f"cached resolve took {per_call * 1e6:.0f} µs"


# -- list / verify -----------------------------------------------------------------------------


def test_list_and_verify(root: Path, tmp_path: Path) -> None:
    write_zip(root, "alpha", "1.0.0", entries=[("murmur.yaml", b"name: alpha\nversion: 1.0.0\n", 0o100644)])
    write_zip(
        root,
        "beta",
        "0.1.0",
        entries=[("murmur.yaml", b"name: beta\nversion: 0.1.0\n", 0o100644)],
        sidecar="0" * 64 + "\n",
    )
    write_zip(root, "gamma", "0.1.0", entries=[("murmur.yaml", b"name: zzz\nversion: 0.1.0\n", 0o100644)])
    (root / "delta" / "0.1.0").mkdir(parents=True)  # a version dir with no zip
    (root / "Bad Name").mkdir()
    (root / "README.md").write_text("not a capsule")
    os.symlink(tmp_path, root / "linked")
    reg = Registry(root)
    listed = [(s.name, s.version) for s in reg.list()]
    assert listed == [("alpha", "1.0.0"), ("beta", "0.1.0"), ("gamma", "0.1.0")]
    assert reg.list()[1].sidecar_sha256 == "0" * 64
    problems = {(p.name, p.version): p.message for p in reg.verify()}
    assert set(problems) == {
        ("beta", "0.1.0"),
        ("gamma", "0.1.0"),
        ("delta", "0.1.0"),
        ("Bad Name", ""),
        ("linked", ""),
    }
    assert "sha256 sidecar does not match" in problems[("beta", "0.1.0")]
    assert "declares 'zzz@0.1.0'" in problems[("gamma", "0.1.0")]
    assert problems[("delta", "0.1.0")].startswith("no artifact at")


def test_verify_bypasses_cache(root: Path) -> None:
    path = write_zip(root, sidecar=None)
    reg = Registry(root)
    reg.resolve("demo", "0.1.0")
    assert reg.verify() == []
    assert reg.cache_info().hashes == 2
    path.write_bytes(b"garbage")
    assert [p.name for p in reg.verify()] == ["demo"]


def test_list_of_missing_root_is_empty(tmp_path: Path) -> None:
    assert Registry(tmp_path / "absent").list() == []


# -- helpers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("a/b.txt", ("a", "b.txt")),
        ("./a//b", ("a", "b")),
        ("dir/", ("dir",)),
        ("../x", None),
        ("a/../x", None),
        ("/etc/passwd", None),
        ("a\\b", None),
        ("a\x00b", None),
        ("", None),
        ("./", None),
    ],
)
def test_safe_member_parts(name: str, parts: tuple[str, ...] | None) -> None:
    assert safe_member_parts(name) == parts


def test_ceilings_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Registry(tmp_path, max_manifest_bytes=0)

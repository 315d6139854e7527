"""roost.state.keys: HKDF derivation, key file creation/loading/refusals, rotation, no leaks."""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from roost.state.keys import KEY_FILE_NAME, KeyFileError, KeyRing

MASTER = bytes(range(32))


def hkdf(info: bytes, master: bytes = MASTER) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(master)


def test_subkeys_are_hkdf_with_documented_info() -> None:
    ring = KeyRing(MASTER)
    assert ring.credential_key == hkdf(b"mur-roost/v1/credential")
    assert ring.approval_key == hkdf(b"mur-roost/v1/approval")
    assert ring.subkey("credential") == ring.credential_key
    assert len({ring.credential_key, ring.approval_key, MASTER}) == 3


def test_key_id() -> None:
    ring = KeyRing(MASTER)
    expected = hashlib.sha256(hkdf(b"mur-roost/v1/key-id")).hexdigest()[:16]
    assert ring.key_id == expected
    assert len(ring.key_id) == 16
    assert KeyRing(bytes(32)).key_id != ring.key_id


def test_handle_key_is_per_session_and_salt() -> None:
    ring = KeyRing(MASTER)
    k = ring.handle_key("ses_a", "salt1")
    assert k == hkdf(b"mur-roost/v1/handle\x1fses_a\x1fsalt1")
    assert ring.handle_key("ses_a", "salt1") == k  # cached, stable
    assert ring.handle_key("ses_a", "salt2") != k
    assert ring.handle_key("ses_b", "salt1") != k
    assert KeyRing(bytes(32)).handle_key("ses_a", "salt1") != k
    assert k not in (ring.credential_key, ring.approval_key)


@pytest.mark.parametrize(("sid", "salt"), [("", "s"), ("s", ""), ("a\x1fb", "s"), ("s", "a\x1fb")])
def test_handle_key_rejects_ambiguous_input(sid: str, salt: str) -> None:
    with pytest.raises(ValueError):
        KeyRing(MASTER).handle_key(sid, salt)


def test_handle_key_cache_is_bounded() -> None:
    ring = KeyRing(MASTER)
    first = ring.handle_key("ses_0", "s")
    for i in range(1, 4200):
        ring.handle_key(f"ses_{i}", "s")
    assert len(ring._handle_cache) <= 4096
    assert ring.handle_key("ses_0", "s") == first  # recomputed identically after eviction


def test_repr_hides_key_material() -> None:
    ring = KeyRing(MASTER)
    for text in (repr(ring), str(ring), f"{ring}"):
        assert MASTER.hex() not in text and repr(MASTER) not in text
        assert ring.credential_key.hex() not in text
        assert ring.key_id in text
    with pytest.raises(TypeError):
        pickle.dumps(ring)


def test_master_must_be_32_bytes() -> None:
    with pytest.raises(ValueError):
        KeyRing(b"x" * 31)


def test_ephemeral_is_random() -> None:
    assert KeyRing.ephemeral().key_id != KeyRing.ephemeral().key_id


# ---- key file --------------------------------------------------------------------------------


def test_load_or_create_creates_then_loads(tmp_path: Path) -> None:
    state = tmp_path / "state"
    ring = KeyRing.load_or_create(state)
    path = state / KEY_FILE_NAME
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_size == 32
    assert [p.name for p in state.iterdir()] == [KEY_FILE_NAME]  # temp file cleaned up
    again = KeyRing.load_or_create(state)
    assert again.key_id == ring.key_id
    assert again.credential_key == ring.credential_key


def test_load_existing_file(tmp_path: Path) -> None:
    path = tmp_path / KEY_FILE_NAME
    path.write_bytes(MASTER)
    path.chmod(0o600)
    assert KeyRing.load_or_create(tmp_path).key_id == KeyRing(MASTER).key_id


def test_created_mode_ignores_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        KeyRing.load_or_create(tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.lstat(tmp_path / KEY_FILE_NAME).st_mode) == 0o600


@pytest.mark.parametrize("size", [0, 16, 31, 33, 64])
def test_refuses_wrong_size(tmp_path: Path, size: int) -> None:
    path = tmp_path / KEY_FILE_NAME
    path.write_bytes(b"k" * size)
    path.chmod(0o600)
    with pytest.raises(KeyFileError) as ei:
        KeyRing.load_or_create(tmp_path)
    msg = str(ei.value)
    assert "not 32" in msg and "remove it" in msg
    assert "k" * 8 not in msg


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o602, 0o620])
def test_refuses_group_or_other_access(tmp_path: Path, mode: int) -> None:
    path = tmp_path / KEY_FILE_NAME
    path.write_bytes(MASTER)
    path.chmod(mode)
    with pytest.raises(KeyFileError) as ei:
        KeyRing.load_or_create(tmp_path)
    assert f"chmod 600 {path}" in str(ei.value)
    assert MASTER.hex() not in str(ei.value)


def test_accepts_owner_only_modes(tmp_path: Path) -> None:
    path = tmp_path / KEY_FILE_NAME
    path.write_bytes(MASTER)
    path.chmod(0o400)
    assert KeyRing.load_or_create(tmp_path).key_id == KeyRing(MASTER).key_id


def test_refuses_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.key"
    real.write_bytes(MASTER)
    real.chmod(0o600)
    (tmp_path / KEY_FILE_NAME).symlink_to(real)
    with pytest.raises(KeyFileError, match="symlink"):
        KeyRing.load_or_create(tmp_path)


def test_refuses_dangling_symlink_without_creating(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    (tmp_path / KEY_FILE_NAME).symlink_to(target)
    with pytest.raises(KeyFileError, match="symlink"):
        KeyRing.load_or_create(tmp_path)
    assert not target.exists()


def test_refuses_directory(tmp_path: Path) -> None:
    (tmp_path / KEY_FILE_NAME).mkdir()
    with pytest.raises(KeyFileError, match="not a regular file"):
        KeyRing.load_or_create(tmp_path)


def test_rotate_replaces_atomically(tmp_path: Path) -> None:
    first = KeyRing.load_or_create(tmp_path)
    rotated = KeyRing.rotate(tmp_path)
    assert rotated.key_id != first.key_id
    assert KeyRing.load_or_create(tmp_path).key_id == rotated.key_id
    path = tmp_path / KEY_FILE_NAME
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE_NAME]


def test_rotate_without_existing_key(tmp_path: Path) -> None:
    ring = KeyRing.rotate(tmp_path / "new")
    assert KeyRing.load_or_create(tmp_path / "new").key_id == ring.key_id


def test_rotate_replaces_a_symlink_not_its_target(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(MASTER)
    (tmp_path / KEY_FILE_NAME).symlink_to(target)
    KeyRing.rotate(tmp_path)
    assert target.read_bytes() == MASTER
    assert not (tmp_path / KEY_FILE_NAME).is_symlink()

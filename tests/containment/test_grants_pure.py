"""Pure parts of the grant plan: which filesystem entries stay inside the workdir, which TCP ports
``network.allow`` opens, and which Landlock rights each ABI knows."""

from __future__ import annotations

import posixpath

from hypothesis import given
from hypothesis import strategies as st

from roost.capsule import landlock
from roost.capsule.confine import _ports
from roost.core.manifest import Manifest, _relative_inside, parse_manifest

segment = st.sampled_from(["a", "b", "out", "..", ".", "x.y"])


@given(st.lists(segment, min_size=1, max_size=8))
def test_relative_inside_matches_lexical_normalisation(parts: list[str]) -> None:
    entry = "/".join(parts)
    norm = posixpath.normpath(entry)
    escapes = False
    depth = 0
    for p in parts:
        if p == "..":
            depth -= 1
            escapes = escapes or depth < 0
        elif p != ".":
            depth += 1
    assert _relative_inside(entry) == (not escapes)
    if not escapes:
        assert not norm.startswith("..")


def test_absolute_empty_and_nul_entries_are_outside() -> None:
    for entry in ("/etc", "", "out\x00", "/"):
        assert not _relative_inside(entry)


def _manifest(allow: list[str]) -> Manifest:
    text = (
        "name: n\nversion: 0.1.0\ncapabilities:\n  network:\n    allow: [" + ", ".join(f'"{a}"' for a in allow) + "]\n"
    )
    return parse_manifest(text)


def test_ports_from_network_allow() -> None:
    ports, notes = _ports(_manifest(["127.0.0.1:8080", "https://example.com", "http://a.test:81"]), [7700, 9])
    assert ports == [9, 81, 443, 7700, 8080]
    assert any("advisory" in n and "example.com" in n for n in notes)
    ports, notes = _ports(_manifest(["127.0.0.1"]), [7700])
    assert ports is None and "not restricted" in notes[0]
    ports, notes = _ports(_manifest([]), [7700, 41000])
    assert ports == [7700, 41000] and notes == []


def test_fs_rights_grow_with_the_abi() -> None:
    assert landlock.fs_rights(1) == (1 << 13) - 1
    assert landlock.fs_rights(2) & landlock.FS_REFER and not landlock.fs_rights(1) & landlock.FS_REFER
    assert landlock.fs_rights(3) & landlock.FS_TRUNCATE and not landlock.fs_rights(2) & landlock.FS_TRUNCATE
    assert landlock.fs_rights(5) & landlock.FS_IOCTL_DEV and not landlock.fs_rights(4) & landlock.FS_IOCTL_DEV
    assert landlock.FS_WRITE & landlock.FS_EXECUTE == 0, "a write grant never carries execute"

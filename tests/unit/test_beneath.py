"""Writes beneath a directory descriptor never follow a link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roost.system.fsutil import LinkRefused, Place, open_beneath, write_atomic_beneath


def test_writes_beneath_refuse_links_anywhere(tmp_path: Path) -> None:
    base = tmp_path / "wd"
    base.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (base / ".murmur").symlink_to(outside)
    with pytest.raises(LinkRefused) as info:
        write_atomic_beneath(base, ".murmur/x/trace.jsonl", b"data", create=True)
    assert "symbolic link" in str(info.value.strerror)
    with pytest.raises(LinkRefused):
        Place(str(base), (".murmur", "ses_x")).write("completion.json", b"{}")
    assert list(outside.iterdir()) == []
    with pytest.raises(LinkRefused):
        open_beneath(tmp_path / "wd" / ".murmur", ())


def test_writes_beneath_create_and_replace(tmp_path: Path) -> None:
    place = Place(str(tmp_path), ("a", "b"))
    place.write("c/file.json", b"one")
    place.write("c/file.json", b"two")
    assert (tmp_path / "a" / "b" / "c" / "file.json").read_bytes() == b"two"
    assert place.read("c/file.json") == b"two"
    # A planted link at the final name is replaced, never written through.
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    os.unlink(tmp_path / "a" / "b" / "c" / "file.json")
    (tmp_path / "a" / "b" / "c" / "file.json").symlink_to(target)
    with pytest.raises(OSError):
        place.read("c/file.json")
    place.write("c/file.json", b"three")
    assert target.read_bytes() == b"keep"
    assert place.read("c/file.json") == b"three"

"""The ``peer-in/`` writer takes only one clean name at commit (a node keeper gets the name from
a remote call), and a refused or aborted write leaves nothing behind."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.services.peer.storage import PeerInWriter, clean_name, stored_path


@pytest.mark.parametrize("name", ["", ".", "..", "../escape", "a/b", "/etc/passwd", "x\x00y", "sp ace", "n" * 300])
def test_a_name_that_is_not_one_clean_component_is_refused_and_nothing_is_left(tmp_path: Path, name: str) -> None:
    writer = PeerInWriter(str(tmp_path))
    writer.open()
    writer.write(b"bytes")
    with pytest.raises(OSError):
        writer.commit(name)
    writer.abort()
    assert list((tmp_path / "peer-in").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["peer-in"]


def test_a_clean_name_is_committed_whole(tmp_path: Path) -> None:
    writer = PeerInWriter(str(tmp_path))
    writer.open()
    writer.write(b"a" * 1000)
    writer.write(b"b")
    name = stored_path("0123456789abcdef", "dir/notes.md").split("/", 1)[1]
    writer.commit(name)
    assert [p.name for p in (tmp_path / "peer-in").iterdir()] == [name]
    assert (tmp_path / "peer-in" / name).read_bytes() == b"a" * 1000 + b"b"


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_every_name_a_fetch_stores_under_passes_the_commit_check(hint: str) -> None:
    name = stored_path("0123456789abcdef", hint).split("/", 1)[1]
    assert name == f"0123456789abcdef-{clean_name(hint)}"
    with tempfile.TemporaryDirectory() as tmp:
        writer = PeerInWriter(tmp)
        writer.open()
        writer.write(b"x")
        writer.commit(name)
        assert os.listdir(os.path.join(tmp, "peer-in")) == [name]

"""The StrictModes workdir rule and the descriptor permission rule, on real directories."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from roost.core.errors import Refused, RoostError
from roost.system.workdirs import (
    NOT_A_DIRECTORY,
    R_OK,
    W_OK,
    X_OK,
    WorkdirRefused,
    check_workdir,
    from_verdict,
    may_access,
    registered_workdir,
    workdir_problem,
    workdir_verdict,
)

ROOT = os.geteuid() == 0


def _st(mode: int, uid: int = 1000, gid: int = 1000, kind: int = stat.S_IFREG) -> os.stat_result:
    return os.stat_result((kind | mode, 0, 0, 1, uid, gid, 0, 0, 0, 0))


@pytest.mark.parametrize(
    ("mode", "uid", "gids", "want", "ok"),
    [
        (0o600, 1000, (), R_OK, True),
        (0o600, 1001, (), R_OK, False),
        (0o640, 1001, (1000,), R_OK, True),
        (0o640, 1001, (1000,), W_OK, False),
        (0o604, 1001, (), R_OK, True),
        (0o060, 1000, (1000,), R_OK, False),  # the owner class decides for the owner
        (0o700, 1000, (), R_OK | W_OK | X_OK, True),
        (0o000, 0, (), R_OK | W_OK, True),
        (0o600, 0, (), X_OK, False),
    ],
)
def test_may_access(mode: int, uid: int, gids: tuple[int, ...], want: int, ok: bool) -> None:
    assert may_access(_st(mode), uid, frozenset(gids), want) is ok


def test_root_searches_any_directory() -> None:
    assert may_access(_st(0o000, kind=stat.S_IFDIR), 0, frozenset(), X_OK)


@pytest.mark.skipif(not ROOT, reason="chown needs root")
def test_workdir_rule(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir(mode=0o755)
    mine = base / "mine"
    mine.mkdir(mode=0o700)
    os.chown(mine, 1000, 1000)
    assert workdir_problem(str(mine), 1000) is None
    assert check_workdir(str(mine) + "/", 1000) == str(mine)
    assert workdir_problem(str(mine), 1001) == f"the workdir {mine} belongs to uid 1000, not to the calling uid 1001"
    mine.chmod(0o770)
    assert "writable by group or others" in (workdir_problem(str(mine), 1000) or "")
    mine.chmod(0o700)
    base.chmod(0o777)
    assert f"{base} is writable by group or others and not sticky" in (workdir_problem(str(mine), 1000) or "")
    base.chmod(0o1777)
    assert workdir_problem(str(mine), 1000) is None
    os.chown(base, 1002, 1002)
    base.chmod(0o755)
    assert f"{base} belongs to uid 1002" in (workdir_problem(str(mine), 1000) or "")
    (tmp_path / "l").symlink_to(mine)
    assert "symbolic link" in (workdir_problem(str(tmp_path / "l"), 1000) or "")
    assert "does not exist" in (workdir_problem(str(tmp_path / "nope"), 0) or "")
    assert workdir_problem("relative", 0) == "workdir must be an absolute path"
    with pytest.raises(Refused) as info:
        check_workdir(str(mine), None)
    assert info.value.status == 403 and "cannot tell which user" in info.value.message


@pytest.mark.skipif(not ROOT, reason="chown needs root")
def test_an_existing_murmur_must_be_the_callers_directory(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    os.chown(mine, 1000, 1000)
    records = mine / ".murmur"
    records.mkdir(mode=0o700)
    os.chown(records, 1000, 1000)
    assert workdir_problem(str(mine), 1000) is None
    os.chown(records, 0, 0)  # root's is fine: roost made it before it gave things away
    assert workdir_problem(str(mine), 1000) is None
    os.chown(records, 1002, 1002)
    assert (
        workdir_problem(str(mine), 1000) == f"the workdir's {records} belongs to uid 1002, not to the calling uid 1000"
    )
    records.rmdir()
    records.symlink_to("/etc")
    assert "symbolic link" in (workdir_problem(str(mine), 1000) or "")


@pytest.fixture
def verdict_dirs(tmp_path: Path) -> Path:
    tmp_path.chmod(0o700)
    (tmp_path / "evil").symlink_to("/etc")
    (tmp_path / "ok").mkdir(mode=0o700)
    return tmp_path


def test_a_verdict_carries_the_same_answer_across_a_remote_call(verdict_dirs: Path) -> None:
    """What a node keeper sends back (plain values) becomes the same error the daemon raises itself."""
    me = os.geteuid()
    ok = str(verdict_dirs / "ok")
    assert workdir_verdict(ok + "/", me) == ("ok", ok)
    assert from_verdict(workdir_verdict(ok, me)) == ok
    assert workdir_verdict(str(verdict_dirs / "missing"), me) == ("bad", NOT_A_DIRECTORY)
    with pytest.raises(WorkdirRefused):
        from_verdict({"nonsense": True})


@pytest.mark.parametrize(
    ("name", "as_me"), [("evil", True), ("missing", True), ("ok", False)], ids=["planted link", "missing", "no uid"]
)
def test_a_refused_verdict_is_the_same_error_across_a_remote_call(verdict_dirs: Path, name: str, as_me: bool) -> None:
    path, uid = str(verdict_dirs / name), os.geteuid() if as_me else None
    with pytest.raises(RoostError) as here:
        registered_workdir(path, uid)
    with pytest.raises(RoostError) as there:
        from_verdict(list(workdir_verdict(path, uid)))  # a list, as a remote call may give it
    assert (type(there.value), there.value.message) == (type(here.value), here.value.message)
    assert there.value.status == here.value.status

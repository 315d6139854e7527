"""roostctl's pure helpers: suggestions, table fitting, and how times are written."""

from __future__ import annotations

import io
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.ctl.commands.spawn import split_capsule
from roost.ctl.errors import Usage
from roost.ctl.output import TABLE_WIDTH, Output, fmt_age, fmt_when, label_of
from roost.ctl.suggest import close_matches, did_you_mean


def test_suggestions() -> None:
    verbs = ["status", "sessions", "spawn", "drain", "dashboard", "completion"]
    assert did_you_mean("stauts", verbs) == "; did you mean 'status'?"
    assert close_matches("sesion", verbs)[0] == "sessions"
    assert close_matches("dash", verbs) == ["dashboard"]  # a prefix counts
    assert did_you_mean("zzzzzz", verbs) == ""
    assert close_matches("ECHO", ["echo", "worker"]) == ["echo"]


def test_split_capsule() -> None:
    assert split_capsule("echo@0.1.0", None) == ("echo", "0.1.0")
    assert split_capsule("echo", "0.1.0") == ("echo", "0.1.0")


@pytest.mark.parametrize(("spec", "version"), [("echo", None), ("echo@", None), ("@1", None), ("echo@1", "1")])
def test_split_capsule_refuses(spec: str, version: str | None) -> None:
    with pytest.raises(Usage):
        split_capsule(spec, version)


def _table(rows: list[dict[str, str]], wide: bool) -> list[str]:
    buf = io.StringIO()
    out = Output(as_json=False, wide=wide, stdout=buf, stderr=io.StringIO())
    cols = [(k, (lambda r, k=k: r[k])) for k in ("id", "name", "path", "extra")]
    out.table(rows, cols, optional=("path", "extra"), keep=("id",))
    return buf.getvalue().splitlines()


cell = st.text(alphabet="abcdefghij/_-.0123456789", min_size=1, max_size=90)


@given(
    st.lists(
        st.fixed_dictionaries(
            {"id": st.text("0123456789abcdef", min_size=1, max_size=36), "name": cell, "path": cell, "extra": cell}
        ),
        min_size=1,
        max_size=5,
    )
)
def test_tables_fit_unless_wide(rows: list[dict[str, str]]) -> None:
    narrow = _table(rows, wide=False)
    assert max(len(ln) for ln in narrow) <= TABLE_WIDTH
    for row in rows:  # ids are never cut
        assert any(ln.startswith(row["id"]) for ln in narrow[1:])
    wide = _table(rows, wide=True)
    assert len(wide[0].split()) == 4  # every column


def test_times_for_people() -> None:
    now = time.time() * 1000
    assert fmt_age(now - 5_000, now) == "5s"
    assert fmt_age(now - 130_000, now) == "2m10s"
    assert fmt_age(now - 3_900_000, now) == "1h05m"
    assert fmt_age(now - 2 * 86_400_000 - 3_600_000, now) == "2d01h"
    assert fmt_age(None) == "-" and fmt_when(True) == "-"
    assert fmt_when(now, now) == time.strftime("%H:%M:%S", time.localtime(now / 1000))
    assert label_of("created_ms") == "created" and label_of("exit_status") == "exit status"

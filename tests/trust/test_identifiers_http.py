"""Every identifier field fed hostile values: a 400 sentence and no file anywhere."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support.daemon import RunningDaemon

HOSTILE = ["/abs/path-roost-t", "../../x-roost-t", "a/b", "..", "a\x00b", "a\nb", "\x1b[0m", "x" * 200, "  "]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("bad", HOSTILE)
async def test_hostile_identifiers_get_400_and_create_nothing(daemon: RunningDaemon, tmp_path: Path, bad: str) -> None:
    work = tmp_path / "wd"
    work.mkdir(exist_ok=True)
    outside = tmp_path.parent
    before_outside = set(os.listdir(outside))
    before = _tree(work)
    _sid, cred = await daemon.register_top("orchestrator", workdir=str(work))
    after_reg = _tree(work)
    base = {
        "session_id": "ses_" + os.urandom(6).hex(),
        "name": "orchestrator",
        "version": "0.1.0",
        "workdir": str(work),
    }
    for field in ("session_id", "name", "version"):
        status, body, _, _ = await daemon.call("POST", "/register", json={**base, field: bad})
        assert status == 400, (field, body)
        assert body["error"].startswith(f"{field} must "), body
    for field in ("name", "version"):
        spawn = {"name": "worker", "version": "0.1.0", field: bad}
        status, body, _, _ = await daemon.call(
            "POST", "/spawn", json=spawn, headers={"x-murmur-spawn-credential": cred}
        )
        assert status == 400 and body["error"].startswith(f"{field} must "), (field, body)
        status, body, _, _ = await daemon.call(
            "POST", "/jobs", json={**spawn, "name": spawn["name"]}, headers={"x-murmur-spawn-credential": cred}
        )
        assert status == 400 and body["error"].startswith(f"{field} must "), (field, body)
    if "/" not in bad and bad != "..":  # a client normalises ".." out of a URL path
        enc = quote(bad, safe="")
        status, body, _, _ = await daemon.call("GET", f"/status/{enc}")
        assert status == 400 and body["error"].startswith("session_id must "), body
        status, body, _, _ = await daemon.call("GET", f"/jobs/{enc}")
        assert status == 400 and body["error"].startswith("job_id must "), body
        status, body, _, _ = await daemon.call("POST", f"/jobs/{enc}/cancel")
        assert status == 400 and body["error"].startswith("job_id must "), body
    assert _tree(work) == after_reg and before <= after_reg
    assert set(os.listdir(outside)) == before_outside
    assert not Path("/abs/path-roost-t").exists()  # noqa: ASYNC240

"""Seed 000's ``session_start.containment_achieved``, written by a real ``roost-capsule``.

The seed's row::

    | `containment_achieved` | string | `"advisory"` \\| `"scoped"` \\| `"sealed"` — the class this host
    can enforce, capped by `workdir_exec`. Nothing in a manifest can raise it. |
"""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.capsule.probe import probe_host
from tests.support.capsules import Capsules, trace_events
from tests.support.registry import RegistryBuilder

OFFERED = probe_host().offered


@pytest.mark.parametrize(
    ("declared", "workdir_exec", "expected"),
    [
        ("advisory", False, OFFERED),
        ("advisory", True, "advisory"),
    ],
)
async def test_containment_achieved_is_the_hosts_class_capped_by_workdir_exec(
    registry: RegistryBuilder, capsules: Capsules, tmp_path: Path, declared: str, workdir_exec: bool, expected: str
) -> None:
    registry.add(
        "c",
        capabilities={"containment": declared, "filesystem": {"workdir_exec": workdir_exec}},
        script="print('ok')",
    )
    work = tmp_path / "w"
    work.mkdir()
    (work / "task.md").write_text("go")
    cp = await capsules.start("c@0.1.0", work, registry=registry.root)
    assert await cp.wait(within=60) == 0, cp.stderr
    start = trace_events(cp.trace)[0]
    assert start["containment_declared"] == declared
    assert start["containment_achieved"] == expected
    assert start["effective_grants"]["achieved_containment"] == expected
    assert start["workdir_exec"] is workdir_exec

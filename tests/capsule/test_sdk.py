"""The official a2a-sdk client talks to a real ``roost-capsule`` door in both dialects.

Reuses the SDK virtualenv fixture and client script of tests/a2a/test_sdk_interop.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.a2a.test_sdk_interop import CLIENT_SCRIPT, sdk_python
from tests.support.capsules import Capsules, add_examples
from tests.support.registry import RegistryBuilder
from tests.trace_checks import assert_trace_guarantees

__all__ = ["sdk_python"]


@pytest.mark.timeout(300)
async def test_sdk_client_against_capsule_door(
    sdk_python: Path, registry: RegistryBuilder, capsules: Capsules, tmp_path: Path
) -> None:
    add_examples(registry, "echo")
    script = tmp_path / "sdk_client.py"
    script.write_text(CLIENT_SCRIPT)
    cp = await capsules.start("echo@0.1.0", tmp_path / "w", registry=registry.root)
    for dialect in ("1.0", "0.3"):
        proc = await asyncio.create_subprocess_exec(
            str(sdk_python),
            str(script),
            cp.url,
            dialect,
            cwd=str(tmp_path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, err.decode()[-3000:]
        result = json.loads(out.decode().strip().splitlines()[-1])
        assert result["id"].startswith("tsk_")
        assert result["state"] == "TASK_STATE_COMPLETED"
        assert result["artifact_text"] == "echo: hello from sdk\n"
    assert await cp.terminate() == 143
    recs = assert_trace_guarantees(cp.trace)
    assert [r["message_id"] for r in recs if r["event_type"] == "a2a_task_received"] == [
        "sdk-1.0-msg-1",
        "sdk-0.3-msg-1",
    ]

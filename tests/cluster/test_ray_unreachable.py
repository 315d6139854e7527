"""A cluster that does not answer when the daemon starts: the daemon starts anyway, refuses
launches with a sentence, keeps retrying, and launches once the cluster answers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.cluster import RUNTIME, add_doubles, wait_for
from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.registry import RegistryBuilder

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.CancelledError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


async def test_launches_are_refused_until_the_cluster_answers(
    ray_ns: str,
    tmp_path: Path,
    registry: RegistryBuilder,
    ray_cluster: Any,
    daemon_processes: list[DaemonProcess],
) -> None:
    add_doubles(registry)
    gcs_host, gcs_port = ray_cluster.address.rsplit(":", 1)
    port = _free_port()
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        f'registry_path = "{registry.root}"\nstate_dir = "{tmp_path / "state"}"\nspawn_allow = ["mid"]\n'
        f"runtime_command = {json.dumps(list(RUNTIME))}\n"
        f'launcher = "ray"\nray_address = "127.0.0.1:{port}"\nray_namespace = "{ray_ns}"\n'
        f'ray_node_root = "{tmp_path / "nodes"}"\n[ray_placement.mid]\nresources = {{ w1 = 1 }}\n'
    )
    loop = asyncio.get_running_loop()
    daemon = await loop.run_in_executor(None, partial(start_daemon_process, ["--config", str(cfg)], timeout=60))
    daemon_processes.append(daemon)
    body = {"name": "mid", "version": "0.1.0", "task": "sleep 0.2"}
    async with aiohttp.ClientSession() as http:
        async with http.post(daemon.url + "/jobs", json=body) as resp:
            answer = await resp.json()
            assert resp.status == 409, answer
        assert f"the Ray cluster (127.0.0.1:{port}) is not reachable yet" in answer["error"], answer
        assert "refused until it answers" in answer["error"]

        # Now the cluster "comes back": a TCP relay to its GCS opens on the configured address.
        async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            up_reader, up_writer = await asyncio.open_connection(gcs_host, int(gcs_port))
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

        server = await asyncio.start_server(relay, "127.0.0.1", port)
        try:

            async def launched() -> Any:
                async with http.post(daemon.url + "/jobs", json=body) as resp:
                    answer = await resp.json()
                    assert resp.status in (201, 409), answer
                    return answer if resp.status == 201 else None

            job = await wait_for(launched, timeout=60, interval=1.0)
            assert job["node"]["node_id"] == ray_cluster.nodes["w1"]

            async def ended() -> Any:
                async with http.get(daemon.url + f"/jobs/{job['job_id']}") as resp:
                    view = await resp.json()
                return view if view["state"] not in ("starting", "running") else None

            assert (await wait_for(ended, timeout=30))["state"] == "complete"
            await loop.run_in_executor(None, daemon.stop)
        finally:
            server.close()

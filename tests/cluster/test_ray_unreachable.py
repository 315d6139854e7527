"""A cluster that does not answer when the daemon starts: the daemon starts anyway, refuses
launches with a sentence, keeps retrying, and launches once the cluster answers. After a
``kill -9``, a restart while the cluster is out of reach finalizes nothing: the children it ran
are re-adopted once the cluster answers, each ending once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest

from tests.support.cluster import RUNTIME, add_doubles, job_processes, no_process_left, wait_for
from tests.support.daemon import DaemonProcess, start_daemon_process
from tests.support.registry import RegistryBuilder

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


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


class GcsRelay:
    """The cluster as the daemon reaches it: a TCP relay to its GCS on a port of the test's own,
    opened and closed at will (closed: the cluster is unreachable at that address)."""

    def __init__(self, gcs_address: str) -> None:
        host, port = gcs_address.rsplit(":", 1)
        self._up = (host, int(port))
        self.port = _free_port()
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._up)
        self._links.update((writer, up_writer))
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for w in self._links:
            w.close()
        self._links.clear()


def _config(tmp_path: Path, registry: RegistryBuilder, port: int, namespace: str) -> Path:
    cfg = tmp_path / "roost.toml"
    cfg.write_text(
        f'registry_path = "{registry.root}"\nstate_dir = "{tmp_path / "state"}"\nspawn_allow = ["mid"]\n'
        f"runtime_command = {json.dumps(list(RUNTIME))}\nstop_grace_secs = 2.0\n"
        f'launcher = "ray"\nray_address = "127.0.0.1:{port}"\nray_namespace = "{namespace}"\n'
        f'ray_node_root = "{tmp_path / "nodes"}"\n[ray_placement.mid]\nresources = {{ w1 = 1 }}\n'
    )
    return cfg


def _ray_descendants(pid: int) -> list[str]:
    """Ray servers the process started (an auto-initialised local Ray would show here)."""
    out = []
    for proc in psutil.Process(pid).children(recursive=True):
        try:
            if proc.name() in ("gcs_server", "raylet"):
                out.append(proc.name())
        except psutil.Error:
            continue
    return out


async def test_a_restart_while_the_cluster_is_unreachable_readopts_its_children_once_it_answers(
    ray_ns: str,
    tmp_path: Path,
    registry: RegistryBuilder,
    ray_cluster: Any,
    daemon_processes: list[DaemonProcess],
) -> None:
    add_doubles(registry)
    relay = GcsRelay(ray_cluster.address)
    await relay.open()
    cfg = _config(tmp_path, registry, relay.port, ray_ns)
    # One daemon port for both: the child reports its end to the URL it was started with.
    args = ["--config", str(cfg), "--port", str(_free_port())]
    # A decoy: Ray's auto-connect, were it on, would join the real cluster behind the relay's back.
    env = {**os.environ, "RAY_ADDRESS": ray_cluster.address}
    loop = asyncio.get_running_loop()
    first = await loop.run_in_executor(None, partial(start_daemon_process, args, env=env, timeout=90))
    daemon_processes.append(first)
    async with aiohttp.ClientSession() as http:
        body = {"name": "mid", "version": "0.1.0", "task": "chatter"}
        async with http.post(first.url + "/jobs", json=body) as resp:
            job = await resp.json()
            assert resp.status == 201, job
        job_id = job["job_id"]
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        await relay.close()
        assert job_processes({job_id}), "the child keeps running without a daemon"

        second = await loop.run_in_executor(None, partial(start_daemon_process, args, env=env, timeout=90))
        daemon_processes.append(second)
        await wait_for(lambda: any('"reconcile_deferred"' in ln for ln in second.stderr_lines), timeout=30)
        # Unreachable: nothing is finalized, no Ray is joined or started, launches and cancels wait.
        async with http.get(f"{second.url}/jobs/{job_id}") as resp:
            view = await resp.json()
        assert view["state"] in ("starting", "running"), view  # as the store last had it
        async with http.post(second.url + "/jobs", json=body) as resp:
            refused = await resp.json()
            assert resp.status == 409, refused
        assert f"the Ray cluster (127.0.0.1:{relay.port}) is not reachable yet" in refused["error"], refused
        async with http.post(f"{second.url}/jobs/{job_id}/cancel") as resp:
            refused = await resp.json()
            assert resp.status == 409, refused
        assert "not reachable yet" in refused["error"], refused
        await asyncio.sleep(3)  # long enough for a stray auto-init to have happened
        admin = aiohttp.UnixConnector(path=str(tmp_path / "state" / "admin.sock"))
        async with aiohttp.ClientSession(connector=admin) as admin_http, admin_http.get("http://admin/cluster") as resp:
            cluster_view = await resp.json()
        assert cluster_view.get("connected") is False, cluster_view
        assert not any('"reconciled"' in ln or '"ray_connected"' in ln for ln in second.stderr_lines)
        assert _ray_descendants(second.proc.pid) == []
        assert job_processes({job_id}), "the child is still running"

        await relay.open()
        line = await wait_for(
            lambda: next((ln for ln in second.stderr_lines if '"reconciled"' in ln), None), timeout=90, interval=0.5
        )
        reconciled = json.loads(line)
        assert (reconciled["matched"], reconciled["lost"], reconciled["orphans"]) == (1, 0, 0), reconciled
        (Path(job["workdir"]) / "go").touch()

        async def ended() -> Any:
            async with http.get(f"{second.url}/jobs/{job_id}") as resp:
                view = await resp.json()
            return view if view["state"] not in ("starting", "running") else None

        final = await wait_for(ended, timeout=60)
    assert final["state"] == "complete", final
    assert final["completion"] is not None and final["completion"]["status"] == "ok", final
    ended_lines = [ln for ln in first.stderr_lines + second.stderr_lines if '"job_ended"' in ln]
    assert [json.loads(ln)["job_id"] for ln in ended_lines] == [job_id]  # finalized exactly once
    await no_process_left({job_id})
    await loop.run_in_executor(None, second.stop)
    await relay.close()


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

"""Shared benchmark plumbing: temp registries, daemons pinned to a core, wrk runs, reports.

Benchmarks compare against a baseline measured in the same run on the same core, because the
machine is shared and noisy: the ratio is the figure that means something, not the absolute.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SERVER_CPU = "0"
CLIENT_CPU = "1"


def taskset(cpu: str) -> list[str]:
    return ["taskset", "-c", cpu] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []


def make_registry(root: Path, capsules: dict[str, dict[str, Any]]) -> None:
    """Pack ``{name: manifest-extras}`` capsules (version 0.1.0) into ``root``."""
    import yaml

    from roost.state.registry.packing import pack_capsule

    src = root.parent / "src"
    for name, extra in capsules.items():
        d = src / name
        d.mkdir(parents=True, exist_ok=True)
        manifest = {"name": name, "version": "0.1.0", **extra}
        script = manifest.pop("script", None)
        if script is not None:
            (d / "main.py").write_text("#!/usr/bin/env python3\n" + textwrap.dedent(script))
            (d / "main.py").chmod(0o755)
            manifest["entrypoint"] = ["main.py"]
        (d / "murmur.yaml").write_text(yaml.safe_dump(manifest))
        pack_capsule(d, root)


@dataclass
class Proc:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path | None = None
    """The daemon's log file (start_daemon), e.g. to read a line it prints after listening."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def checkout_env(tree: str) -> dict[str, str]:
    """The environment in which Python imports ``roost`` and ``a2a`` from the checkout ``tree``.

    ``PYTHONPATH`` alone is not enough: ``-m`` and ``-c`` put the current directory first on the
    import path, ahead of it, so a process started from this checkout would import this one."""
    return dict(os.environ, PYTHONPATH=os.path.abspath(tree), PYTHONSAFEPATH="1")


def callgrind_totals(out: Path) -> int:
    """The instructions callgrind counted in the run that wrote ``out``."""
    return callgrind_events(out)["Ir"]


def callgrind_events(out: Path) -> dict[str, int]:
    """Every event callgrind counted in the run that wrote ``out``, by its name: ``Ir`` (instructions),
    and with ``--cache-sim=yes --branch-sim=yes`` the simulated cache misses and mispredicted branches."""
    text = out.read_text()
    names = re.search(r"^events: (.+)$", text, re.MULTILINE)
    totals = re.search(r"^totals: ([\d ]+)$", text, re.MULTILINE)
    if names is None or totals is None:
        raise SystemExit(f"callgrind wrote no totals to {out}")
    return dict(zip(names.group(1).split(), map(int, totals.group(1).split()), strict=True))


def start_daemon(
    args: list[str],
    cpu: str = SERVER_CPU,
    env: dict[str, str] | None = None,
    launcher: str | None = None,
    *,
    prefix: list[str] | None = None,
    timeout: float = 30,
    tree: str | None = None,
) -> Proc:
    """Start ``mur-roost``; its log goes to a file, as journald would take it, not a slow pipe.

    ``launcher``: Python code that runs the daemon instead of ``-m roost`` (it gets the daemon's
    arguments in ``sys.argv[1:]``), for a baseline that changes the daemon in its own process.
    ``prefix``: a command the interpreter runs under (e.g. valgrind), given ``timeout`` s to listen.
    ``tree``: another checkout whose daemon runs (:func:`checkout_env`)."""
    run = ["-m", "roost"] if launcher is None else ["-c", launcher]
    if tree is not None:
        env = {**checkout_env(tree), **(env or {})}
    cwd = os.path.abspath(tree) if tree is not None else None
    cmd = [*taskset(cpu), *(prefix or []), sys.executable, *run, "--port", "0", "--log-format", "json", *args]
    log_path = Path(tempfile.mkdtemp(prefix="roost-bench-")) / "daemon.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log_file, env=env, cwd=cwd)
    deadline = time.monotonic() + timeout
    pat = re.compile(rb"listening on \S+:(\d+)")
    while time.monotonic() < deadline:
        m = pat.search(log_path.read_bytes())
        if m:
            return Proc(proc, int(m.group(1)), log_path)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("daemon did not start:\n" + log_path.read_text(errors="replace"))


def start_script(code: str, cpu: str = SERVER_CPU) -> Proc:
    """Run a python server script that prints its port on the first stdout line."""
    proc = subprocess.Popen([*taskset(cpu), sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    port = int(proc.stdout.readline().decode().strip())
    return Proc(proc, port)


def post_json(url: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


@dataclass
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float
    bytes_per_s: float
    non2xx: int


def median_by(results: list[Any], attr: str) -> Any:
    """The result whose ``attr`` is the median (the lower middle one for an even count)."""
    ordered = sorted(results, key=lambda r: getattr(r, attr))
    return ordered[(len(ordered) - 1) // 2]


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}
_BYTES = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}


def wrk(
    url: str,
    *,
    method: str = "GET",
    body: str | None = None,
    headers: dict[str, str] | None = None,
    connections: int = 50,
    seconds: int = 8,
    rotate: tuple[str, list[str]] | None = None,
    counter: str | None = None,
) -> WrkResult:
    """Run wrk; ``rotate=(header, values)`` sends each request with the next value of ``header``;
    ``counter`` is a placeholder in ``body`` that each request replaces with its own number (e.g.
    so every request carries a message id of its own)."""
    if not shutil.which("wrk"):
        raise SystemExit("wrk is required for this benchmark: apt-get install wrk")
    lua = ["wrk.method = " + json.dumps(method)]
    if body is not None:
        lua.append("wrk.body = " + json.dumps(body))
    for k, v in (headers or {}).items():
        lua.append(f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}")
    if rotate is not None:
        name, values = rotate
        lua.append("local values = {" + ", ".join(json.dumps(v) for v in values) + "}")
        lua.append("local n = 0")
        lua.append("request = function()")
        lua.append("  n = n + 1")
        lua.append(f"  wrk.headers[{json.dumps(name)}] = values[(n % #values) + 1]")
        lua.append("  return wrk.format()")
        lua.append("end")
    if counter is not None and body is not None:
        pre, _, post = body.partition(counter)
        lua.append(f"local pre, post, n = {json.dumps(pre)}, {json.dumps(post)}, 0")
        lua.append("request = function()")
        lua.append("  n = n + 1")
        lua.append("  return wrk.format(nil, nil, nil, pre .. n .. post)")
        lua.append("end")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write("\n".join(lua) + "\n")
        script = fh.name
    try:
        out = subprocess.run(
            [*taskset(CLIENT_CPU), "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", script, url],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        os.unlink(script)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    tr = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", out)
    bps = float(tr.group(1)) * _BYTES.get(tr.group(2), 1) if tr else 0.0

    def pct(p: str) -> float:
        m = re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)", out)
        return float(m.group(1)) * _UNITS[m.group(2)] if m else float("nan")

    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return WrkResult(rps, pct("50"), pct("99"), bps, int(non2xx.group(1)) if non2xx else 0)


_SERVE = """
import asyncio as _asyncio
from aiohttp import web as _web


async def _serve():
    handler = build_handler() if "build_handler" in globals() else None
    if handler is not None:  # a plain request handler, served as the capsule host serves its door
        runner = _web.ServerRunner(_web.Server(handler, access_log=None))
    else:
        runner = _web.AppRunner(build_app(), access_log=None)
    await runner.setup()
    await _web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    if "on_port" in globals():
        on_port(port)
    print(port, flush=True)
    await _asyncio.Event().wait()


_asyncio.run(_serve())
"""


def app_script(body: str) -> str:
    """A server script for :func:`start_script`: ``body`` defines ``build_app()`` (and optionally
    ``on_port(port)``, and ``build_handler()``: a plain request handler to serve instead, or None);
    the shared skeleton serves it on an ephemeral loopback port and prints it."""
    return textwrap.dedent(body) + _SERVE


BARE_JSON_SERVER = app_script(
    """
    import json
    from aiohttp import web

    async def handler(request):
        body = json.loads(await request.read())
        return web.json_response({"approval": "x" * 300, "name": body.get("name"), "version": body.get("version"),
                                  "sha256": "0" * 64, "expires_at_ms": 0})

    def build_app():
        app = web.Application()
        app.router.add_post("/spawn", handler)
        return app
    """
)


# A bare asyncio process that starts ``n`` children of ``argv`` (``limit`` at a time), reads each
# one's first stdout line, then waits for them to exit (or kills them with ``kill``) and prints
# ``ready_seconds ended_seconds``: the same-run baseline for launch storms.
_DIRECT_STORM = """
import asyncio, json, os, signal, sys, time
argv, n, limit, kill = json.loads(sys.argv[1])
async def main():
    sem = asyncio.Semaphore(limit)
    procs = []
    async def one():
        async with sem:
            p = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, process_group=0)
            p.stdin.write(b"go\\n"); p.stdin.close()
            await p.stdout.readline()
            procs.append(p)
    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    ready = time.perf_counter() - t0
    if kill:
        for p in procs:
            try: os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError: pass
    await asyncio.gather(*(p.wait() for p in procs))
    print(ready, time.perf_counter() - t0, flush=True)
asyncio.run(main())
"""


def direct_storm(argv: list[str], n: int, *, limit: int, kill: bool, cpu: str = SERVER_CPU) -> tuple[float, float]:
    """Start ``n`` children directly (no daemon): seconds until all are ready, and until all ended."""
    out = subprocess.run(
        [*taskset(cpu), sys.executable, "-c", _DIRECT_STORM, json.dumps([argv, n, limit, kill])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return float(out[0]), float(out[1])

"""Act as another local user: an HTTP client in a child process that runs as ``uid``.

The child is the system's own Python (``/usr/bin/python3``, stdlib only), started with
``user=``/``group=`` so it drops to the attacker's uid before exec; the test's interpreter may
live where that uid cannot read.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

NOBODY = 65534

_CLIENT = r"""
import http.client, json, socket, sys
req = json.loads(sys.stdin.read())

class UnixConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(req["unix"])

if req.get("unix"):
    conn = UnixConnection("localhost", timeout=30)
else:
    conn = http.client.HTTPConnection(req["host"], req["port"], timeout=30)
body = None if req["body"] is None else json.dumps(req["body"]).encode()
headers = dict(req["headers"])
if body is not None:
    headers["content-type"] = "application/json"
if req.get("data") is not None:
    body = req["data"].encode()
conn.request(req["method"], req["path"], body=body, headers=headers)
resp = conn.getresponse()
raw = resp.read()
print(json.dumps({"status": resp.status, "raw": raw.decode("utf-8", "replace")}))
"""


def system_python() -> str:
    """An interpreter every uid can run: the system's, else this one."""
    for cand in ("/usr/bin/python3", shutil.which("python3") or ""):
        if cand and os.access(cand, os.X_OK):
            return cand
    return sys.executable


async def request_as(
    uid: int,
    url: str,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    data: str | None = None,
) -> tuple[int, Any]:
    """One HTTP request from a process running as ``uid``; the status and the decoded body.

    ``url`` is ``http://host:port`` or ``unix:/path/to/socket``.

    ``data`` is sent as the body as it is (with whatever content-type ``headers`` name), the way a
    browser's form or ``text/plain`` fetch would."""
    unix = url.removeprefix("unix:") if url.startswith("unix:") else None
    host, port = ("", "0") if unix else url.removeprefix("http://").rsplit(":", 1)
    spec = {
        "unix": unix,
        "host": host.strip("[]"),
        "port": int(port),
        "method": method,
        "path": path,
        "body": body,
        "headers": headers or {},
        "data": data,
    }
    proc = await asyncio.create_subprocess_exec(
        system_python(),
        "-I",
        "-c",
        _CLIENT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        user=uid,
        group=uid if uid != NOBODY else NOBODY,
        extra_groups=[],
        cwd="/",
    )
    out, err = await proc.communicate(json.dumps(spec).encode())
    assert proc.returncode == 0, err.decode(errors="replace")
    answer = json.loads(out)
    try:
        decoded = json.loads(answer["raw"])
    except ValueError:
        decoded = answer["raw"]
    return answer["status"], decoded


def owned_dir(parent: Path, name: str, uid: int, mode: int = 0o700) -> Path:
    """A directory under ``parent`` owned by ``uid`` with ``mode``."""
    d = parent / name
    d.mkdir(mode=mode)
    os.chown(d, uid, uid)
    d.chmod(mode)
    return d

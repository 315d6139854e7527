"""``roost-capsule``: run a script capsule (``run``), or, from inside one, ask the host for things.

Why the client verbs are stdlib-only: ``send``/``get``/``share``/``fetch``/``delegate`` run inside an
entrypoint, often once per task, so they import nothing heavy (no aiohttp, no pydantic) and talk
HTTP/1.1 to ``$MURMUR_HOST_SOCKET`` with ``http.client`` over ``AF_UNIX``. The host adds the
session credential; these commands never see it.

Exit codes: 0 ok, 1 refused or failed, 2 usage, 3 the host or the daemon is unreachable.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from roost import __version__
from roost.core.wire import FINAL_JOB_STATES, HOST_ERROR_HEADER

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
POLL_SECS = 0.5
STREAM_IDLE_SECS = 120.0  # the relay sends a heartbeat every 15 s; a stream silent this long has failed


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class HostError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _socket_path() -> str:
    sock_path = os.environ.get("MURMUR_HOST_SOCKET", "").strip()
    if not sock_path:
        raise HostError(EXIT_UNREACHABLE, "MURMUR_HOST_SOCKET is not set: run this from a roost-capsule entrypoint")
    return sock_path


def _call(verb: str, method: str, path: str, body: Mapping[str, object] | None, timeout: float = 120.0) -> Any:
    """One request to the host socket; the daemon's JSON answer, or HostError with an exit code."""
    sock_path = _socket_path()
    conn = _UnixConnection(sock_path, timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        from_host = resp.getheader(HOST_ERROR_HEADER) is not None
        status = resp.status
    except OSError as exc:
        raise HostError(EXIT_UNREACHABLE, f"cannot reach the capsule host at {sock_path}: {exc}") from None
    finally:
        conn.close()
    if 200 <= status < 300:
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None
    _raise_answer(verb, status, raw, from_host)


def _raise_answer(verb: str, status: int, raw: bytes, from_host: bool) -> NoReturn:
    """HostError for an answer that is not a success (the daemon's or the host's sentence)."""
    try:
        answer = json.loads(raw) if raw else None
    except ValueError:
        answer = None
    err = answer.get("error") if isinstance(answer, dict) else None
    msg = answer.get("message") if isinstance(answer, dict) else None
    text = msg if isinstance(msg, str) and msg else (err if isinstance(err, str) else raw.decode(errors="replace"))
    if from_host:
        raise HostError(EXIT_UNREACHABLE if status in (502, 503) else EXIT_FAILED, text)
    if status == 404 and err == "not found":
        raise HostError(EXIT_FAILED, f"mur-roost has no endpoint for '{verb}' (it answered 404 not found)")
    raise HostError(EXIT_FAILED, f"{status}: {text}")


def _print(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _coords(value: str) -> tuple[str, str]:
    name, sep, version = value.partition("@")
    if not sep or not name or not version:
        raise argparse.ArgumentTypeError(f"'{value}' is not NAME@VERSION")
    return name, version


def _cmd_send(a: argparse.Namespace) -> int:
    body: dict[str, object] = {"peer_url": a.peer, "text": a.text}
    if a.context_id:
        body["context_id"] = a.context_id
    if a.task_id:
        body["task_id"] = a.task_id
    if a.traceparent:
        body["traceparent"] = a.traceparent
    if a.stream:
        return _stream_send(body)
    _print(_call("send", "POST", "/send", body))
    return EXIT_OK


def _stream_send(body: Mapping[str, object]) -> int:
    """``send --stream``: print each event the relay streams (one JSON object a line) as it comes;
    1 when the stream ends with an error event (docs/api.md, "Streaming a send")."""
    sock_path = _socket_path()
    conn = _UnixConnection(sock_path, STREAM_IDLE_SECS)
    try:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        conn.request("POST", "/send", body=json.dumps(body).encode(), headers=headers)
        resp = conn.getresponse()
        if not (resp.getheader("Content-Type") or "").startswith("text/event-stream"):
            _raise_answer("send", resp.status, resp.read(), resp.getheader(HOST_ERROR_HEADER) is not None)
        status = EXIT_OK
        data: list[str] = []
        for raw in resp:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
            elif not line and data:
                event = json.loads("\n".join(data))
                data = []
                _print(event)
                if isinstance(event, dict) and event.get("kind") == "error":
                    status = EXIT_FAILED
        return status
    except OSError as exc:
        raise HostError(EXIT_UNREACHABLE, f"cannot reach the capsule host at {sock_path}: {exc}") from None
    finally:
        conn.close()


def _cmd_get(a: argparse.Namespace) -> int:
    _print(_call("get", "POST", "/get", {"peer_url": a.peer, "task_id": a.task_id}))
    return EXIT_OK


def _cmd_share(a: argparse.Namespace) -> int:
    body: dict[str, object] = {"path": a.path, "peer": a.peer}
    if a.ttl is not None:
        body["ttl_secs"] = a.ttl
    _print(_call("share", "POST", "/share", body))
    return EXIT_OK


def _cmd_fetch(a: argparse.Namespace) -> int:
    body: dict[str, object] = {"peer": a.peer, "handle": a.handle}
    if a.etag:
        body["etag"] = a.etag
    _print(_call("fetch", "POST", "/fetch", body))
    return EXIT_OK


def _result_text(job: dict[str, Any]) -> str | None:
    """The child's result file text: ``<job.workdir>/<completion.result_path>`` when both are known."""
    workdir = job.get("workdir")
    if not isinstance(workdir, str):
        return None
    completion = job.get("completion")
    rel = completion.get("result_path") if isinstance(completion, dict) else job.get("result_path")
    if not isinstance(rel, str):
        try:
            rec = json.loads((Path(workdir) / "completion.json").read_text())
            rel = rec.get("result_path") if isinstance(rec, dict) else None
        except (OSError, ValueError):
            rel = None
    if not isinstance(rel, str) or rel.startswith("/") or ".." in Path(rel).parts:
        return None
    try:
        return (Path(workdir) / rel).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _cmd_delegate(a: argparse.Namespace) -> int:
    name, version = a.capsule
    body: dict[str, object] = {"name": name, "version": version, "task": a.task}
    if a.deadline_secs is not None:
        body["deadline_secs"] = a.deadline_secs
    if a.untrusted:
        body["untrusted"] = True
    job = _call("delegate", "POST", "/delegate", body)
    if not a.wait:
        _print(job)
        return EXIT_OK
    if not isinstance(job, dict) or not isinstance(job.get("job_id"), str):
        raise HostError(EXIT_FAILED, "mur-roost answered the delegation without a job_id")
    job_id = job["job_id"]
    state = job.get("state")
    sys.stderr.write(f"roost-capsule: {name}@{version} job {job_id} is {state}\n")
    while state not in FINAL_JOB_STATES:
        time.sleep(POLL_SECS)
        job = _call("delegate", "GET", f"/jobs/{job_id}", None)
        if not isinstance(job, dict):
            raise HostError(EXIT_FAILED, "mur-roost answered GET /jobs with something that is not a job")
        if job.get("state") != state:
            state = job.get("state")
            sys.stderr.write(f"roost-capsule: job {job_id} is {state}\n")
    text = _result_text(job)
    if text is not None:
        sys.stdout.write(text)
        sys.stdout.flush()
    return EXIT_OK if state == "complete" else EXIT_FAILED


def _cmd_run(a: argparse.Namespace) -> int:
    from roost.capsule.host import RunOptions, run  # heavy imports only for the host itself

    name, version = a.capsule
    return run(
        RunOptions(
            name=name,
            version=version,
            workdir=Path(a.workdir),
            json=a.json,
            spawn_grant_stdin=a.spawn_grant_stdin,
            registry_path=Path(a.registry_path) if a.registry_path else None,
        )
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="roost-capsule", description="Reference host for murmur script capsules.")
    # What roostctl doctor runs on each Ray node to check the capsule command there.
    p.add_argument("--version", action="version", version=f"roost-capsule {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a script capsule as a full session")
    run.add_argument("capsule", type=_coords, metavar="NAME@VERSION")
    run.add_argument("--workdir", required=True)
    run.add_argument("--json", action="store_true", help="print the ready line as JSON on stdout")
    run.add_argument("--spawn-grant-stdin", action="store_true", help="read the spawn approval from stdin")
    run.add_argument("--registry-path", help="registry root (else $MURMUR_REGISTRY_PATH, else ~/.murmur/artifacts)")
    run.set_defaults(fn=_cmd_run)
    send = sub.add_parser("send", help="send an A2A message through roost's relay")
    send.add_argument("--peer", required=True)
    send.add_argument("--context-id")
    send.add_argument("--task-id", help="continue this task (one waiting for input) instead of starting one")
    send.add_argument("--traceparent")
    send.add_argument(
        "--stream", action="store_true", help="stream the peer's updates, printing each as it comes (one JSON a line)"
    )
    send.add_argument("text")
    send.set_defaults(fn=_cmd_send)
    get = sub.add_parser("get", help="read a task's state at a peer through roost's relay")
    get.add_argument("--peer", required=True)
    get.add_argument("task_id")
    get.set_defaults(fn=_cmd_get)
    share = sub.add_parser("share", help="mint a peer-file handle for a file this capsule exports")
    share.add_argument("path")
    share.add_argument("--peer", required=True)
    share.add_argument("--ttl", type=int)
    share.set_defaults(fn=_cmd_share)
    fetch = sub.add_parser("fetch", help="fetch a peer's file handle into peer-in/")
    fetch.add_argument("--peer", required=True)
    fetch.add_argument("--etag")
    fetch.add_argument("handle")
    fetch.set_defaults(fn=_cmd_fetch)
    dl = sub.add_parser("delegate", help="delegate a task to another capsule")
    dl.add_argument("capsule", type=_coords, metavar="NAME@VERSION")
    dl.add_argument("--task", required=True)
    dl.add_argument("--wait", action="store_true")
    dl.add_argument("--deadline-secs", type=int)
    dl.add_argument("--untrusted", action="store_true")
    dl.set_defaults(fn=_cmd_delegate)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code not in (0, None) else EXIT_OK
    try:
        code: int = args.fn(args)
    except HostError as exc:
        sys.stderr.write(f"roost-capsule {args.command}: {exc}\n")
        return exc.code
    return code

"""Launch a capsule top-level, on the operator's behalf (the daemon's spawn_allow still decides).

Calls ``POST /jobs`` with ``{name, version, task, workdir?, deadline_secs?, formation_id?}`` and prints the job
(201). With ``--wait`` it then polls ``GET /jobs/{id}`` and reports progress on stderr (state
changes, delegations started under it) until the job ends; exit 0 when it completed, 1 when it
failed, crashed or was terminated. ``--json`` prints only the final job object.

When the daemon refuses, roostctl says more than the daemon's sentence: whether the capsule
exists in the registry at all (with the nearest names), and which capsules ``spawn_allow`` lets
run top-level.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from roost.core.admin_models import ConfigView, JobView, TreeAnswer, TreeNode
from roost.core.wire import FINAL_JOB_STATES
from roost.ctl.client import quote_id
from roost.ctl.commands.job import show
from roost.ctl.context import Context
from roost.ctl.errors import ApiError, CtlError, Usage
from roost.ctl.suggest import close_matches

NAME = "spawn"
HELP = "launch a capsule top-level"
DESCRIPTION = (
    "Launch a capsule as a top-level job: roostctl spawn NAME@VERSION --task TEXT (or NAME VERSION).\n"
    "The capsule must be in the registry and allowed by the daemon's spawn_allow setting."
)
POLL_SECS = 0.5


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("capsule", metavar="NAME@VERSION", help="the capsule, e.g. orchestrator@0.1.0 (or NAME VERSION)")
    p.add_argument("version", nargs="?", metavar="VERSION", help="the version, when not given as NAME@VERSION")
    p.add_argument("--task", metavar="TEXT", help="task text ('-' reads it from stdin)")
    p.add_argument("--workdir", metavar="DIR", help="absolute working directory for the session")
    p.add_argument("--deadline", type=float, metavar="SECS", help="end the job after SECS seconds")
    p.add_argument(
        "--formation-id",
        metavar="frm_<32 hex>",
        help="the formation the job joins (its MURMUR_FORMATION_ID; its delegated children join it too)",
    )
    p.add_argument("--wait", action="store_true", help="wait for the job to end, with progress on stderr")


def split_capsule(capsule: str, version: str | None) -> tuple[str, str]:
    """``name@version`` or ``name`` + ``version`` → (name, version); a usage error otherwise."""
    name, at, ver = capsule.partition("@")
    if at:
        if version is not None:
            raise Usage(f"give the version once: '{capsule}' already names {ver or 'no version'}")
        if not name or not ver:
            raise Usage(f"'{capsule}' is not NAME@VERSION (e.g. echo@0.1.0)")
        return name, ver
    if version is None:
        raise Usage(f"which version of '{capsule}'? give NAME@VERSION, e.g. {capsule}@0.1.0")
    return capsule, version


def _count(nodes: list[TreeNode]) -> int:
    return sum(1 + _count(n["children"]) for n in nodes)


def _find(nodes: list[TreeNode], session_id: str) -> TreeNode | None:
    for n in nodes:
        if n["session_id"] == session_id:
            return n
        hit = _find(n["children"], session_id)
        if hit is not None:
            return hit
    return None


def wait(ctx: Context, job: JobView) -> JobView:
    job_id = job["job_id"]
    started = time.monotonic()
    last_state = None
    last_kids = 0
    while True:
        state = job["state"]
        elapsed = time.monotonic() - started
        if state != last_state:
            ctx.out.info(f"[{elapsed:6.1f}s] {job_id} {state}")
            last_state = state
        if state in FINAL_JOB_STATES:
            return job
        sid = job["session_id"]
        if sid is not None:
            try:
                tree: TreeAnswer = ctx.client.call("GET", "/tree?state=all")
                node = _find(tree["roots"], sid)
                kids = _count(node["children"]) if node else 0
            except CtlError:
                kids = last_kids
            if kids != last_kids:
                ctx.out.info(f"[{elapsed:6.1f}s] {job_id} {kids} delegation(s) below it")
                last_kids = kids
        time.sleep(POLL_SECS)
        job = ctx.client.call("GET", f"/jobs/{quote_id(job_id)}")


def explain_refusal(ctx: Context, name: str, version: str, exc: ApiError) -> CtlError:
    """The daemon's sentence plus what an operator needs: unknown or not allowed, and what is."""
    try:
        config: ConfigView = ctx.client.call("GET", "/config")
    except CtlError:
        return exc
    allowed = sorted(config.get("spawn_allow") or [])
    root = Path(str(config.get("registry_path", "")))
    try:
        from roost.state.registry.catalog import Catalog

        listed = Catalog(root).list() if root.is_dir() else []
    except (ImportError, OSError):
        return exc
    versions: dict[str, list[str]] = {}
    for art in listed:
        versions.setdefault(art.name, []).append(art.version)
    allowed_text = ", ".join(allowed) if allowed else "none (spawn_allow is empty)"
    top = f"Capsules allowed to run top-level here (spawn_allow): {allowed_text}."
    if name not in versions:
        near = close_matches(name, versions)
        hint = f" (did you mean {' or '.join(repr(n) for n in near)}?)" if near else ""
        return CtlError(
            f"capsule '{name}' does not exist in the registry {root}{hint}. {top}",
            status=exc.status,
            code=exc.code,
        )
    if version not in versions[name]:
        return CtlError(
            f"capsule '{name}' has no version {version} in the registry {root}; "
            f"its versions: {', '.join(sorted(versions[name]))} (e.g. {name}@{sorted(versions[name])[-1]})",
            status=exc.status,
            code=exc.code,
        )
    if allowed and name not in allowed:
        return CtlError(
            f"capsule '{name}@{version}' exists but is not allowed to run top-level on this daemon. {top}",
            status=exc.status,
            code=exc.code,
        )
    return exc


def run(ctx: Context, args: argparse.Namespace) -> int:
    name, version = split_capsule(args.capsule, args.version)
    if args.task is None:
        raise Usage("--task is required (use --task - to read it from stdin)")
    task = sys.stdin.read() if args.task == "-" else args.task
    body: dict[str, object] = {"name": name, "version": version, "task": task}
    if args.workdir:
        body["workdir"] = args.workdir
    if args.deadline is not None:
        body["deadline_secs"] = args.deadline
    if args.formation_id is not None:
        body["formation_id"] = args.formation_id
    try:
        job: JobView = ctx.client.call("POST", "/jobs", body)
    except ApiError as exc:
        if exc.status not in (429, 503):  # busy or draining: the daemon's sentence says it all
            raise explain_refusal(ctx, name, version, exc) from None
        raise
    if not args.wait:
        show(ctx, job)
        return 0
    if not ctx.out.as_json:
        ctx.out.info(f"launched {job['job_id']} ({name}@{version}); waiting")
    final = wait(ctx, job)
    show(ctx, final)
    return 0 if final["state"] == "complete" else 1

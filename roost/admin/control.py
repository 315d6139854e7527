"""Operator actions shared by the admin API and the signal handlers: drain, key rotation, reload.

Why here and not in the handlers: SIGHUP and ``POST /reload`` must do exactly the same thing,
and so must a drain started by ``roostctl drain`` and one a test starts in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import structlog

from roost.admin import bridge
from roost.config import NETWORK_KEYS, Config, ConfigError
from roost.keys import KeyRing
from roost.registry import Registry

if TYPE_CHECKING:
    from roost.daemon import Roost

__all__ = ["RESTART_ONLY", "active_jobs", "active_work", "drain", "drain_status", "reload", "rotate_keys"]

log = structlog.get_logger("roost.admin")

# Settings a running daemon cannot take over without rebinding or reopening state.
RESTART_ONLY = ("port", "bind", "allow_remote", "state_dir", "ephemeral_keys", "admin_socket", *NETWORK_KEYS)
DRAIN_POLL_SECS = 0.2


def active_work(roost: Roost) -> tuple[int, int]:
    """(running sessions, active jobs): what a drain waits for."""
    counts = bridge.counts_by_state(roost)
    return roost.table.running, sum(counts.get(s, 0) for s in bridge.ACTIVE_STATES)


def active_jobs(roost: Roost) -> list[dict[str, Any]]:
    """The jobs a drain is waiting for, oldest first (what ``roostctl drain --wait`` lists)."""
    jobs = [j for j in roost.launcher.jobs.values() if j.state in bridge.ACTIVE_STATES]
    jobs.sort(key=lambda j: (j.created_ms, j.job_id))
    return [
        {
            "job_id": j.job_id,
            "name": j.name,
            "version": j.version,
            "state": j.state,
            "created_ms": j.created_ms,
            "parent_session_id": j.parent_id,
        }
        for j in jobs
    ]


def drain(roost: Roost, *, timeout_secs: float | None = None) -> dict[str, Any]:
    """Refuse new spawns and launches, wait for running work to end, then ask the daemon to stop.

    Idempotent: a second drain does not start a second waiter, but its deadline applies (the
    earlier of the two wins), so ``drain --deadline`` on a daemon already draining is honoured.
    """
    already = roost.referee.draining
    roost.referee.draining = True
    loop = asyncio.get_running_loop()
    if timeout_secs is not None:
        wanted = loop.time() + timeout_secs
        if roost.drain_deadline is None or wanted < roost.drain_deadline:
            roost.drain_deadline = wanted
    sessions, jobs = active_work(roost)
    if not already:
        log.info("drain_started", running_sessions=sessions, active_jobs=jobs, timeout_secs=timeout_secs)
        task = loop.create_task(_drain_then_stop(roost))
        roost.background.add(task)
        task.add_done_callback(roost.background.discard)
    elif timeout_secs is not None:
        log.info("drain_deadline_set", timeout_secs=timeout_secs)
    return {"already_draining": already, **drain_status(roost)}


def drain_status(roost: Roost) -> dict[str, Any]:
    """Whether the daemon drains, what it still waits for, and how long until it stops anyway."""
    sessions, jobs = active_work(roost)
    deadline = roost.drain_deadline
    left = None if deadline is None else round(max(0.0, deadline - asyncio.get_running_loop().time()), 3)
    return {
        "draining": roost.referee.draining,
        "running_sessions": sessions,
        "active_jobs": jobs,
        "deadline_in_secs": left,
        "jobs": active_jobs(roost),
    }


async def _drain_then_stop(roost: Roost) -> None:
    loop = asyncio.get_running_loop()
    while any(active_work(roost)):
        deadline = roost.drain_deadline
        if deadline is not None and loop.time() >= deadline:
            sessions, jobs = active_work(roost)
            log.warning("drain_timeout", running_sessions=sessions, active_jobs=jobs)
            break
        await asyncio.sleep(DRAIN_POLL_SECS)
    log.info("drain_finished")
    roost.request_stop("drain")


async def rotate_keys(roost: Roost) -> dict[str, Any]:
    """Replace the master key; every credential, approval and handle dies (all derive from it).

    With ``--ephemeral-keys`` the new key lives in memory only, like the old one. Pending
    reservations are released at once: their approvals can no longer be redeemed, so keeping
    their slots would only block new spawns for up to 60 s.
    """
    # Two rotations at once would each write a key file and race to install theirs: the one in
    # memory could then differ from the one on disk. One at a time.
    async with roost.rotate_lock:
        return await _rotate_keys(roost)


async def _rotate_keys(roost: Roost) -> dict[str, Any]:
    old = roost.keys.key_id
    if roost.config.ephemeral_keys:
        ring = KeyRing.ephemeral()
    else:
        ring = await roost.executor.run(KeyRing.rotate, roost.config.state_dir)
    roost.keys = ring
    roost.referee.keys = ring
    table = roost.table
    pending = 0
    for parent_id in list(table.reservations_of):
        pending += len(roost.referee.release_slots_of(parent_id))
    affected = table.running
    log.warning(
        "keys_rotated",
        previous_key_id=old,
        key_id=ring.key_id,
        sessions_affected=affected,
        approvals_revoked=pending,
        ephemeral=roost.config.ephemeral_keys,
    )
    return {
        "key_id": ring.key_id,
        "previous_key_id": old,
        "sessions_affected": affected,
        "approvals_revoked": pending,
        "persisted": not roost.config.ephemeral_keys,
    }


def _merge(old: Config, new: Config) -> tuple[Config, list[str]]:
    """The new config with restart-only settings kept from the old one; names of those that differ."""
    kept = [k for k in RESTART_ONLY if getattr(old, k) != getattr(new, k)]
    if not kept:
        return new, []
    values = new.model_dump()
    for k in kept:
        values[k] = getattr(old, k)
    return Config.model_validate(values), kept


async def reload(roost: Roost) -> dict[str, Any]:
    """Re-read the config file and forget registry caches; running sessions and jobs are untouched.

    Reloads run one at a time: each merges onto the configuration the one before it installed.
    """
    async with roost.reload_lock:
        return await _reload(roost)


async def _reload(roost: Roost) -> dict[str, Any]:
    loader = roost.config_loader
    changed: list[str] = []
    needs_restart: list[str] = []
    error: str | None = None
    if loader is not None:
        try:
            fresh = await roost.executor.run(loader)
        except ConfigError as exc:
            error = str(exc)
            log.error("reload_failed", error=error)
        else:
            merged, needs_restart = _merge(roost.config, fresh)
            changed = [k for k in Config.model_fields if getattr(merged, k) != getattr(roost.config, k)]
            if "registry_path" in changed:
                roost.registry = Registry(merged.registry_path)
                roost.referee.registry = roost.registry
            roost.config = merged
            roost.referee.config = merged
            if "log_level" in changed or "log_format" in changed:
                from roost.logs import configure_logging

                configure_logging(merged.log_format, merged.log_level)
    roost.referee.forget_resolved()
    with contextlib.suppress(Exception):
        await roost.executor.run(roost.registry.clear_cache)
    log.info("reloaded", changed=",".join(changed), needs_restart=",".join(needs_restart), failed=error is not None)
    out: dict[str, Any] = {"reloaded": error is None, "changed": changed, "needs_restart": needs_restart}
    if error is not None:
        out["error"] = error
    return out

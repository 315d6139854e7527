"""Delivering a task's updates to the webhooks its push-notification configs name.

Why it looks like this (docs/a2a.md, "Push notifications"):

* Every post is checked first by the embedding application's ``guard`` (the URL's refusal
  sentence, or None): roost's capsule host passes the one egress guard the relay uses, so a
  webhook only reaches what the session's ``capabilities.network.allow`` covers and never the
  daemon's or this door's own listeners. The transport never follows a redirect (a 3xx is a
  failed delivery, not retried).
* Each config has its own ordered, bounded outbox and one sender at a time; a post that fails
  with no answer, a 5xx, 408 or 429 is retried with backoff (:data:`RETRY_DELAYS`), any other
  non-2xx is given up at once. Delivery never holds up the task: updates are queued.
* 1.0 configs get each update as a ``StreamResponse`` (``{"statusUpdate"}``/``{"artifactUpdate"}``),
  as the official 1.x SDK posts them; 0.3 configs get the whole Task after each update, as the
  official 0.3 SDK posts it (a newer Task replaces one not yet sent). ``X-A2A-Notification-Token``
  carries the config's token, ``Authorization`` its scheme and credentials.
* No error text ever names the token or credentials.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping

from yarl import URL

from a2a.protocol import jsonrpc
from a2a.protocol.models import dump_task
from a2a.protocol.pushconfig import PushConfig
from a2a.protocol.streamevents import TaskEvent, dump_event
from a2a.taskrecord import TaskRecord

__all__ = ["RETRY_DELAYS", "TOKEN_HEADER", "PushDelivery"]

log = logging.getLogger("a2a.push")

TOKEN_HEADER = "X-A2A-Notification-Token"
RETRY_DELAYS = (0.5, 2.0, 8.0)  # after the first attempt: four attempts in all
OUTBOX = 256  # updates waiting per config; past it the oldest are dropped (a log line says so)
Post = Callable[[str, URL, bytes | None, Mapping[str, str]], Awaitable[tuple[int, bytes, str | None]]]
"""One HTTP exchange (the :class:`a2a.client.Transport` shape): (status, body, Location)."""
Guard = Callable[[str], str | None]
"""A webhook URL's refusal sentence, or None when it may be posted to."""


class _Outbox:
    """One config's queued bodies and its sender."""

    __slots__ = ("bodies", "config", "dropped", "sender", "snapshot")

    def __init__(self, config: PushConfig) -> None:
        self.config = config
        self.bodies: deque[bytes] = deque()
        self.snapshot = False  # 0.3: the newest body is a whole Task that a newer one may replace
        self.sender: asyncio.Task[None] | None = None
        self.dropped = 0


class PushDelivery:
    """Posts the updates of tasks that have push-notification configs."""

    def __init__(
        self, post: Post, guard: Guard, *, retry_delays: tuple[float, ...] = RETRY_DELAYS, http_only: bool = True
    ) -> None:
        self._post = post
        self._guard = guard
        self._delays = retry_delays
        self.http_only = http_only
        self._boxes: dict[tuple[str, str], _Outbox] = {}  # (task id, config id)
        self.delivered = 0
        self.failed = 0

    def refusal(self, url: str) -> str | None:
        """Why a config's URL would never be posted to (checked when it is set), or None."""
        lowered = url.lower()
        if self.http_only and not lowered.startswith("http://"):
            return f"push notification URL {url[:200]!r} is not a plain http:// URL, the only kind this door posts to"
        if not lowered.startswith(("http://", "https://")):
            return f"push notification URL {url[:200]!r} is not an http:// or https:// URL"
        return self._guard(url)

    def attach(self, rec: TaskRecord, config: PushConfig) -> None:
        """Start posting ``rec``'s updates to ``config`` (the record keeps the config)."""
        self._boxes[rec.task.id, config.id] = _Outbox(config)

        def hear(event: TaskEvent) -> None:
            self._queue(rec, config, event)

        rec.listen(_Hearer(config.id, hear))

    def detach(self, rec: TaskRecord, config_id: str) -> None:
        box = self._boxes.pop((rec.task.id, config_id), None)
        for listener in list(rec.listeners or ()):
            if isinstance(listener, _Hearer) and listener.config_id == config_id:
                rec.unlisten(listener)
        if box is not None and box.sender is not None:
            box.sender.cancel()

    def _queue(self, rec: TaskRecord, config: PushConfig, event: TaskEvent) -> None:
        box = self._boxes.get((rec.task.id, config.id))
        if box is None:
            return
        if config.dialect == "1.0":
            body = jsonrpc.dumps(dump_event(event, "1.0"))
            snapshot = False
        else:
            body = jsonrpc.dumps(dump_task(rec.to_task(history_length=0), "0.3"))
            snapshot = True
        if snapshot and box.snapshot and box.bodies:
            box.bodies[-1] = body  # a newer whole Task replaces the one still waiting
        else:
            if len(box.bodies) >= OUTBOX:
                box.bodies.popleft()
                box.dropped += 1
                if box.dropped in (1, 100) or box.dropped % 10_000 == 0:
                    log.warning(
                        "push outbox of %s for %s is full; dropped %d updates", config.id, rec.task.id, box.dropped
                    )
            box.bodies.append(body)
        box.snapshot = snapshot
        if box.sender is None or box.sender.done():
            box.sender = asyncio.get_running_loop().create_task(self._send_all(box), name=f"a2a-push-{config.id}")

    async def _send_all(self, box: _Outbox) -> None:
        while box.bodies:
            body = box.bodies.popleft()
            if not box.bodies:
                box.snapshot = False  # the body being sent is no longer replaceable
            if await self._deliver(box.config, body):
                self.delivered += 1
            else:
                self.failed += 1

    async def _deliver(self, config: PushConfig, body: bytes) -> bool:
        refusal = self._guard(config.url)
        if refusal is not None:
            log.warning("push notification for %s not sent: %s", config.task_id, refusal)
            return False
        headers: dict[str, str] = {"Content-Type": "application/json"}
        if config.token is not None:
            headers[TOKEN_HEADER] = config.token
        if config.scheme is not None and config.credentials is not None:
            headers["Authorization"] = f"{config.scheme} {config.credentials}"
        url = URL(config.url)
        for attempt, delay in enumerate((0.0, *self._delays)):
            if delay:
                await asyncio.sleep(delay)
            try:
                status, _, _ = await self._post("POST", url, body, headers)
            except (OSError, ValueError) as exc:
                reason = str(exc) or type(exc).__name__
                log.info("push to %s for %s failed (attempt %d): %s", config.url, config.task_id, attempt + 1, reason)
                continue
            if 200 <= status < 300:
                return True
            if 300 <= status < 400:
                log.warning(
                    "push to %s for %s answered %d: redirects are never followed", config.url, config.task_id, status
                )
                return False
            if status not in (408, 429) and status < 500:
                log.warning("push to %s for %s refused (%d); not retried", config.url, config.task_id, status)
                return False
            log.info("push to %s for %s answered %d (attempt %d)", config.url, config.task_id, status, attempt + 1)
        return False

    async def close(self, grace: float = 2.0) -> None:
        """Let the senders post what is queued for up to ``grace`` s, then stop them (the rest is dropped)."""
        senders = [b.sender for b in self._boxes.values() if b.sender is not None and not b.sender.done()]
        if senders and grace > 0:
            await asyncio.wait(senders, timeout=grace)
        for sender in senders:
            sender.cancel()
        for sender in senders:
            with contextlib.suppress(asyncio.CancelledError):
                await sender


class _Hearer:
    """The record listener of one config (told apart by id, so a delete can remove it)."""

    __slots__ = ("config_id", "hear")

    def __init__(self, config_id: str, hear: Callable[[TaskEvent], None]) -> None:
        self.config_id = config_id
        self.hear = hear

    def __call__(self, event: TaskEvent) -> None:
        self.hear(event)

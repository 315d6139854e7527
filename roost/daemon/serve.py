"""Running the daemon as a process: start it, tell systemd, handle signals, stop cleanly.

Start-up order and the stop are :class:`~roost.daemon.compose.Roost`'s; this module is the
process around it: the collector tuned for serving, ``READY=1``, SIGHUP as a reload, SIGTERM and
SIGINT as a stop (a second one exits at once), and the lines that say where it listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
from collections.abc import Callable

import structlog

from roost.daemon.compose import Roost
from roost.daemon.startup import StartupError
from roost.observe.logs import configure_logging
from roost.state.config import Config
from roost.system import sdnotify

__all__ = ["GC_THRESHOLDS", "run"]

# Serving allocates young objects fast and frees nearly all of them by reference counting, while
# what it keeps is a few large containers (pending slots under a flood: hundreds of thousands of
# items) that every full collection walks item by item, 30-40 ms at 500k slots, and that a new
# slot re-tracks into the youngest generation after each one. Collecting the young generation
# every 20,000 allocations instead of 700, and the oldest after 20 middle ones instead of 10, cuts
# those pauses from one every few seconds to one every few minutes under such a flood. A young
# reference cycle still goes at the next young collection (about a second under load); one that
# lived long enough to be promoted waits for a full one.
GC_THRESHOLDS = (20_000, 20, 20)

log = structlog.get_logger("roost.daemon")


async def _serve(config: Config, config_loader: Callable[[], Config] | None = None) -> int:
    roost = Roost(config)
    roost.settings.loader = config_loader
    try:
        await roost.start()
    except StartupError as exc:
        print(f"mur-roost: {exc}", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            await roost.store.close()
        roost.executor.shutdown()
        return exc.exit_code
    # Everything loaded so far (modules, models, the restored table) lives as long as the
    # process: move it out of the collector's sight, so a full collection walks only what
    # serving creates and stays a short pause instead of tens of milliseconds.
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals_seen = 0
    # Both listeners are bound, so tell systemd we are ready.
    sdnotify.notify("READY=1", f"STATUS={roost.probes.status_line()}", f"MAINPID={os.getpid()}")
    roost.probes.start_notifications()

    def on_stop_request(reason: str) -> None:
        roost.lifecycle.stopping = True
        sdnotify.notify("STOPPING=1")
        stop.set()

    roost.lifecycle.stop_callback = on_stop_request

    def on_hup() -> None:
        log.info("reload_requested", signal="SIGHUP")
        roost.lifecycle.spawn(roost.control.reload())

    loop.add_signal_handler(signal.SIGHUP, on_hup)

    def on_signal(signame: str) -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen > 1:
            print("mur-roost: second signal, exiting now", file=sys.stderr, flush=True)
            os._exit(130)
        log.info("stopping", signal=signame)
        on_stop_request(signame)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    # Said once the signals are handled, so whoever waits for this line can stop us cleanly.
    lifecycle = roost.lifecycle
    print(f"mur-roost: listening on {config.bind}:{lifecycle.port}", file=sys.stderr, flush=True)
    if lifecycle.network_url is not None:
        print(f"mur-roost: listening for other hosts at {lifecycle.network_url}", file=sys.stderr, flush=True)
    print(
        f"mur-roost: machine ceiling {config.max_live_capsules} live capsules (--max-live-capsules)",
        file=sys.stderr,
        flush=True,
    )
    await stop.wait()
    await roost.stop()
    log.info("stopped")
    return 0


def run(config: Config, config_loader: Callable[[], Config] | None = None) -> int:
    configure_logging(config.log_format, config.log_level)
    return asyncio.run(_serve(config, config_loader))

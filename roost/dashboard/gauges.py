"""Host gauges from the daemon's ``/status`` and Prometheus ``/metrics`` text (pure parsing).

Shown: live capsules against the ceiling, jobs starting (the launch queue), refusals by class
(every ``roost_spawn_requests_total`` outcome other than ``granted``) and event-loop lag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from roost.core.admin_models import StatusAnswer

__all__ = ["Gauges", "gauges", "parse_metrics"]

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) for every sample line; comments and malformed lines are skipped."""
    out: list[tuple[str, dict[str, str], float]] = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), value))
    return out


@dataclass
class Gauges:
    live: int = 0
    ceiling: int = 0
    starting: int = 0
    running_jobs: int = 0
    draining: bool = False
    loop_lag_ms: float | None = None  # mean since start
    loop_lag_p99_ms: float | None = None  # the bucket bound 99% of probes stayed under
    refusals: dict[str, int] = field(default_factory=dict)

    @property
    def live_ratio(self) -> float:
        return min(1.0, self.live / self.ceiling) if self.ceiling else 0.0


def gauges(status: StatusAnswer, metrics_text: str) -> Gauges:
    jobs = status["jobs"]
    g = Gauges(
        live=status["sessions"]["running"],
        ceiling=status["max_live_capsules"],
        starting=jobs.get("starting", 0),
        running_jobs=jobs.get("running", 0),
        draining=status["draining"],
    )
    lag_sum = lag_count = 0.0
    buckets: list[tuple[float, float]] = []
    for name, labels, value in parse_metrics(metrics_text):
        if name == "roost_spawn_requests_total" and labels.get("outcome", "granted") != "granted":
            g.refusals[labels["outcome"]] = g.refusals.get(labels["outcome"], 0) + int(value)
        elif name in ("roost_event_loop_lag_seconds", "roost_event_loop_lag_seconds_sum"):
            lag_sum = value
            lag_count = lag_count or (1.0 if name == "roost_event_loop_lag_seconds" else 0.0)
        elif name == "roost_event_loop_lag_seconds_count":
            lag_count = value
        elif name == "roost_event_loop_lag_seconds_bucket" and labels.get("le") not in (None, "+Inf"):
            buckets.append((float(labels["le"]), value))
    if lag_count:
        g.loop_lag_ms = 1000 * lag_sum / lag_count
        g.loop_lag_p99_ms = next((1000 * le for le, n in sorted(buckets) if n >= 0.99 * lag_count), None)
    return g

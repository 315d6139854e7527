"""The last hour of the host gauges, for the dashboard's charts: a bounded ring in the daemon.

Why a ring in the daemon and not a time-series server: an operator who runs ``roostctl
dashboard`` wants to see how the last hour went without having set up Prometheus first. One
sample every :data:`INTERVAL_SECS` — live capsules, jobs starting, the worst event-loop lag since
the sample before, and the running totals of spawn decisions and refusals (a reader turns those
into rates) — is kept as a plain tuple in a deque of :data:`KEEP` entries: a fixed, small amount
of memory (bench/bench_otel.py measures it) however long the daemon runs.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from roost.core.admin_models import HistoryAnswer

__all__ = ["INTERVAL_SECS", "KEEP", "GaugeHistory", "Sample"]

INTERVAL_SECS = 5.0
KEEP = 720
"""One hour of samples at :data:`INTERVAL_SECS`."""


class Sample(NamedTuple):
    t_ms: int
    live: int
    starting: int
    lag_ms: float
    spawns: int
    refusals: int


class GaugeHistory:
    def __init__(self, keep: int = KEEP, interval_secs: float = INTERVAL_SECS) -> None:
        self.interval_secs = interval_secs
        self.samples: deque[Sample] = deque(maxlen=keep)

    def record(self, sample: Sample) -> None:
        self.samples.append(sample)

    def view(self) -> HistoryAnswer:
        """The admin API's ``GET /history`` answer: the interval, the field names, the rows."""
        return {
            "interval_secs": self.interval_secs,
            "fields": list(Sample._fields),
            "samples": [list(s) for s in self.samples],
        }

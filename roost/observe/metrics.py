"""Prometheus metrics, one registry per daemon instance (tests run several in one process)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from roost import __version__

__all__ = ["Metrics"]


class _SpawnDecisions(Collector):
    """``roost_spawn_requests_total`` by outcome, counted in a plain dict on the event loop.

    Every /spawn counts one; a ``Counter`` child's ``inc`` takes a lock and two calls for what
    the loop, its only writer, can do with one dict update. A scrape reads a copy.
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._created = time.time()

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily("roost_spawn_requests", "Spawn decisions by outcome", labels=["outcome"])
        for outcome, n in sorted(dict(self.counts).items()):
            family.add_metric([outcome], n, created=self._created)
        yield family


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._spawn_decisions = _SpawnDecisions()
        r.register(self._spawn_decisions)
        self.jobs = Gauge("roost_jobs", "Jobs by state", ["state"], registry=r)
        self.capsules = Gauge(
            "roost_capsules", "Live capsules: running sessions and reserved slots", ["state"], registry=r
        )
        self.launch_seconds = Histogram(
            "roost_spawn_duration_seconds",
            "Time from POST /jobs to the child's ready line",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180),
            registry=r,
        )
        self.capsule_exits = Counter("roost_capsule_exits", "Child exits by reason", ["reason"], registry=r)
        self.deliveries = Counter(
            "roost_completion_deliveries", "Completion deliveries by outcome", ["outcome"], registry=r
        )
        self.handles_minted = Counter("roost_handles_minted", "Peer handle mints by outcome", ["outcome"], registry=r)
        self.handle_redemptions = Counter(
            "roost_handle_redemptions", "Peer handle redemptions by outcome", ["outcome"], registry=r
        )
        self.relay_requests = Counter(
            "roost_a2a_relay_requests",
            "A2A relay requests by method and outcome",
            ["method", "outcome"],
            registry=r,
        )
        self.loop_lag = Histogram(
            "roost_event_loop_lag_seconds",
            "Event-loop lag measured by a periodic probe",
            buckets=(0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1),
            registry=r,
        )
        self.otel_spans_dropped = Counter(
            "roost_otel_spans_dropped",
            "Finished spans the OpenTelemetry exporter dropped because its queue was full",
            registry=r,
        )
        self.build_info = Gauge("roost_build_info", "Build information", ["version"], registry=r)
        self.build_info.labels(version=__version__).set(1)

    def spawn_decisions(self) -> dict[str, int]:
        """Spawn decisions so far by outcome (a copy)."""
        return dict(self._spawn_decisions.counts)

    def spawn_decision(self, outcome: str) -> None:
        counts = self._spawn_decisions.counts
        counts[outcome] = counts.get(outcome, 0) + 1

    def render(self) -> bytes:
        return generate_latest(self.registry)

"""Prometheus metrics, one registry per daemon instance (tests run several in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from roost import __version__

__all__ = ["Metrics"]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._spawn_children: dict[str, Counter] = {}
        self.spawn_requests = Counter("roost_spawn_requests", "Spawn decisions by outcome", ["outcome"], registry=r)
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
        self.build_info = Gauge("roost_build_info", "Build information", ["version"], registry=r)
        self.build_info.labels(version=__version__).set(1)

    def spawn_decision(self, outcome: str) -> None:
        child = self._spawn_children.get(outcome)
        if child is None:
            child = self._spawn_children[outcome] = self.spawn_requests.labels(outcome=outcome)
        child.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)

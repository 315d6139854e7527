"""OpenTelemetry export for the daemon: on when the standard ``OTEL_*`` settings name an endpoint.

Why here, apart from the composition root: whether to export, with which settings, and what to
say when the ``otel`` extra is missing are start-up decisions; the exporter itself lives with the
observation events it reads (:mod:`roost.observe.otel`). Tracing never stops the daemon from
starting: a setting it cannot use, or a missing SDK, is one warning line and tracing stays off.
docs/operations.md, "OpenTelemetry traces".
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

import structlog

from roost.observe.events import EventBus
from roost.observe.metrics import Metrics
from roost.observe.otelmap import otel_settings
from roost.state.config import Config

if TYPE_CHECKING:
    from roost.observe.otel import OtelExporter

__all__ = ["Tracing"]

log = structlog.get_logger("roost.otel")


class Tracing:
    """The exporter's lifetime beside the daemon's: ``start`` after the bus exists, ``stop`` last."""

    def __init__(self, events: EventBus, metrics: Metrics) -> None:
        self._events = events
        self._metrics = metrics
        self.exporter: OtelExporter | None = None

    def start(self, cfg: Config, env: Mapping[str, str] | None = None) -> None:
        try:
            settings = otel_settings(os.environ if env is None else env, cfg.otel_file_settings())
        except ValueError as exc:
            log.warning("otel_export_off", reason=str(exc))
            return
        if settings is None:
            return
        try:
            from roost.observe.otel import OtelExporter
        except ImportError:
            log.warning(
                "otel_export_off",
                reason="an OTLP endpoint is set but the OpenTelemetry SDK is not installed",
                fix="pip install 'mur-roost[otel]'",
            )
            return
        counter = self._metrics.otel_spans_dropped
        self.exporter = OtelExporter(settings, on_drop=counter.inc, root_span=self._events.root_span)
        self.exporter.start()
        self._events.sink = self.exporter.offer

    async def stop(self) -> None:
        """Stop taking spans, export what is queued (bounded), stop the worker."""
        exporter, self.exporter = self.exporter, None
        if exporter is None:
            return
        self._events.sink = None
        await asyncio.to_thread(exporter.stop)

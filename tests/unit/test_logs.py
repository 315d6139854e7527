"""Logging reconfiguration reaches loggers already cached, and a token never reaches a line."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest
import structlog

from roost.observe import logs


class _Stderr:
    def __init__(self) -> None:
        self.buffer = io.BytesIO()

    def isatty(self) -> bool:
        return False


@pytest.fixture
def stderr() -> Iterator[_Stderr]:
    """A stand-in stderr; each test installs it itself (pytest re-installs its own capture
    between a fixture's set-up and the test's call)."""
    yield _Stderr()
    structlog.reset_defaults()
    logs._min_level = logging.INFO  # what configure_logging left behind


def lines(fake: _Stderr) -> list[str]:
    return fake.buffer.getvalue().decode().splitlines()


def test_reload_changes_level_and_format_of_a_cached_logger(stderr: _Stderr, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", stderr)
    logs.configure_logging("json", "info")
    log = structlog.get_logger("test.logs")
    log.debug("hidden")
    log.info("shown", n=1)  # the logger is cached from here on
    assert [json.loads(x)["event"] for x in lines(stderr)] == ["shown"]
    assert not logs.enabled_for(logging.DEBUG) and logs.enabled_for(logging.INFO)

    logs.configure_logging("json", "debug")
    log.debug("now shown")
    assert json.loads(lines(stderr)[-1]) | {"ts": None} == {"event": "now shown", "level": "debug", "ts": None}
    assert logs.enabled_for(logging.DEBUG)

    logs.configure_logging("console", "warning")
    log.info("hidden again")
    log.warning("as text", k="v")
    last = lines(stderr)[-1]
    assert len(lines(stderr)) == 3 and "as text" in last and "k=v" in last and not last.startswith("{")


def test_a_token_is_redacted_in_either_format(stderr: _Stderr, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", stderr)
    token = "msc1." + "A" * 40 + "." + "B" * 43
    for fmt in ("json", "console"):
        logs.configure_logging(fmt, "info")
        structlog.get_logger("test.logs.redact").info("oops", header=token)
    text = stderr.buffer.getvalue().decode()
    assert token not in text and text.count("\n") == 2

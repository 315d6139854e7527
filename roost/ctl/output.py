"""How roostctl prints: JSON on stdout only under ``--json``; tables and trees otherwise.

Messages and progress always go to stderr, so ``roostctl jobs --json | jq`` never sees them.
Colour only on a terminal, never with ``NO_COLOR`` set (https://no-color.org) or ``TERM=dumb``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO, TypeVar

__all__ = ["TABLE_WIDTH", "Column", "Output", "fmt_age", "fmt_ms", "fmt_when", "label_of"]

Row = TypeVar("Row")
Column = tuple[str, Callable[[Any], object]]
"""A table column: its header and how to read its cell from a row (a typed answer's row)."""
# Tables fit this many columns unless ``--wide``: the less useful columns go first, then the
# longest cells are cut with an ellipsis (ids never: they are what people copy).
TABLE_WIDTH = 100
_ELLIPSIS = "…"

_COLORS = {"green": "32", "red": "31", "yellow": "33", "dim": "2", "bold": "1", "cyan": "36"}
_STATE_COLORS = {
    "running": "green",
    "starting": "cyan",
    "complete": "dim",
    "ok": "green",
    "failed": "red",
    "crashed": "red",
    "terminated": "yellow",
    "error": "red",
    "warn": "yellow",
}


def fmt_ms(ms: object) -> str:
    """A wall-clock time in milliseconds as a full local date and time ("2026-12-01 09:15:02")."""
    if not isinstance(ms, (int, float)) or isinstance(ms, bool):
        return "-"
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def fmt_when(ms: object, now_ms: float | None = None) -> str:
    """A compact local time for table cells: "09:15:02" today, "Nov 30 09:15" before."""
    if not isinstance(ms, (int, float)) or isinstance(ms, bool):
        return "-"
    import time

    now = time.time() if now_ms is None else now_ms / 1000
    then = time.localtime(ms / 1000)
    if time.localtime(now)[:3] == then[:3]:
        return time.strftime("%H:%M:%S", then)
    return time.strftime("%b %d %H:%M", then)


def fmt_age(ms: object, now_ms: float | None = None) -> str:
    """How long ago ``ms`` was, in the two largest units ("3s", "2m10s", "1h05m", "2d03h")."""
    if not isinstance(ms, (int, float)) or isinstance(ms, bool):
        return "-"
    import time

    now = time.time() * 1000 if now_ms is None else now_ms
    secs = max(0, int((now - ms) // 1000))
    if secs < 60:
        return f"{secs}s"
    if secs < 3600:
        return f"{secs // 60}m{secs % 60:02d}s"
    if secs < 86400:
        return f"{secs // 3600}h{secs % 3600 // 60:02d}m"
    return f"{secs // 86400}d{secs % 86400 // 3600:02d}h"


def label_of(key: str) -> str:
    """A field name for people: ``created_ms`` → ``created``, ``exit_status`` → ``exit status``."""
    return key.removesuffix("_ms").replace("_", " ")


class Output:
    def __init__(
        self, *, as_json: bool, wide: bool = False, stdout: TextIO | None = None, stderr: TextIO | None = None
    ) -> None:
        self.as_json = as_json
        self.wide = wide
        self.out = stdout or sys.stdout
        self.err = stderr or sys.stderr
        env = os.environ
        self.color = (
            not as_json
            and "NO_COLOR" not in env
            and env.get("TERM") != "dumb"
            and hasattr(self.out, "isatty")
            and self.out.isatty()
        )
        self.err_color = "NO_COLOR" not in env and env.get("TERM") != "dumb" and self.err.isatty()

    # -- primitives ------------------------------------------------------------------------
    def paint(self, text: str, color: str | None) -> str:
        if not self.color or color is None or color not in _COLORS:
            return text
        return f"\x1b[{_COLORS[color]}m{text}\x1b[0m"

    def state(self, state: object) -> str:
        text = str(state if state is not None else "-")
        return self.paint(text, _STATE_COLORS.get(text))

    def json(self, data: object) -> None:
        self.out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        self.out.flush()

    def json_line(self, data: object) -> None:
        self.out.write(json.dumps(data, separators=(",", ":"), ensure_ascii=False) + "\n")
        self.out.flush()

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def info(self, text: str) -> None:
        """A message for people: stderr in both modes."""
        self.err.write(text + "\n")
        self.err.flush()

    def error(self, text: str) -> None:
        prefix = "\x1b[31mroostctl:\x1b[0m " if self.err_color else "roostctl: "
        self.err.write(prefix + text + "\n")
        self.err.flush()

    # -- shapes ----------------------------------------------------------------------------
    def table(
        self,
        rows: Sequence[Row],
        columns: Sequence[tuple[str, Callable[[Row], object]]],
        *,
        empty: str = "(none)",
        optional: Sequence[str] = (),
        keep: Sequence[str] = (),
    ) -> None:
        """Rows under upper-case headers, at most :data:`TABLE_WIDTH` wide unless ``--wide``.

        ``optional`` names the columns dropped first (last named goes first) when the table is
        too wide; ``keep`` names columns never cut (ids someone will copy).
        """
        if not rows:
            self.info(empty)
            return
        cols = list(columns)
        cells = [[("-" if (v := get(r)) is None else str(v)) for _, get in cols] for r in rows]
        if not self.wide:
            cols, cells = _fit(cols, cells, list(optional), set(keep))
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (h, _) in enumerate(cols)]
        self.line(
            self.paint("  ".join(h.upper().ljust(w) for (h, _), w in zip(cols, widths, strict=True)).rstrip(), "bold")
        )
        for row in cells:
            parts = []
            for i, (text, w) in enumerate(zip(row, widths, strict=True)):
                pad = text.ljust(w)
                parts.append(self.paint(pad, _STATE_COLORS.get(text)) if cols[i][0] in ("state", "status") else pad)
            self.line("  ".join(parts).rstrip())

    def pairs(self, items: Iterable[tuple[str, object]]) -> None:
        items = list(items)
        width = max((len(k) for k, _ in items), default=0)
        for key, value in items:
            self.line(f"{key.ljust(width)}  {'-' if value is None else value}")


def _width(cols: Sequence[Column], cells: Sequence[Sequence[str]]) -> int:
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (h, _) in enumerate(cols)]
    return sum(widths) + 2 * (len(widths) - 1)


def _fit(
    cols: list[Column], cells: list[list[str]], optional: list[str], keep: set[str]
) -> tuple[list[Column], list[list[str]]]:
    """Drop optional columns, then cut the widest cuttable column, until the table fits."""
    while _width(cols, cells) > TABLE_WIDTH and optional:
        name = optional.pop()
        idx = next((i for i, (h, _) in enumerate(cols) if h == name), None)
        if idx is not None:
            cols = cols[:idx] + cols[idx + 1 :]
            cells = [row[:idx] + row[idx + 1 :] for row in cells]
    while (over := _width(cols, cells) - TABLE_WIDTH) > 0:
        cuttable = [i for i, (h, _) in enumerate(cols) if h not in keep]
        if not cuttable:
            break
        idx = max(cuttable, key=lambda i: max(len(c[i]) for c in cells))
        longest = max(len(c[idx]) for c in cells)
        limit = max(len(cols[idx][0]), 8, longest - over)
        if limit >= longest:
            break
        cells = [
            [(t if j != idx or len(t) <= limit else t[: limit - 1] + _ELLIPSIS) for j, t in enumerate(row)]
            for row in cells
        ]
    return cols, cells

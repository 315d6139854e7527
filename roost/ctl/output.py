"""How roostctl prints: JSON on stdout only under ``--json``; tables and trees otherwise.

Messages and progress always go to stderr, so ``roostctl jobs --json | jq`` never sees them.
Colour only on a terminal, never with ``NO_COLOR`` set (https://no-color.org) or ``TERM=dumb``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

__all__ = ["Column", "Output", "fmt_ms"]

Column = tuple[str, Callable[[dict[str, Any]], object]]

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
    if not isinstance(ms, (int, float)) or isinstance(ms, bool):
        return "-"
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


class Output:
    def __init__(self, *, as_json: bool, stdout: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self.as_json = as_json
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

    def json(self, data: Any) -> None:
        self.out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        self.out.flush()

    def json_line(self, data: Any) -> None:
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
    def table(self, rows: Sequence[dict[str, Any]], columns: Sequence[Column], *, empty: str = "(none)") -> None:
        if not rows:
            self.info(empty)
            return
        cells = [[("-" if (v := get(r)) is None else str(v)) for _, get in columns] for r in rows]
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (h, _) in enumerate(columns)]
        self.line(self.paint("  ".join(h.upper().ljust(w) for (h, _), w in zip(columns, widths, strict=True)), "bold"))
        for row in cells:
            parts = []
            for i, (text, w) in enumerate(zip(row, widths, strict=True)):
                pad = text.ljust(w)
                parts.append(self.paint(pad, _STATE_COLORS.get(text)) if columns[i][0] in ("state", "status") else pad)
            self.line("  ".join(parts).rstrip())

    def pairs(self, items: Iterable[tuple[str, object]]) -> None:
        items = list(items)
        width = max((len(k) for k, _ in items), default=0)
        for key, value in items:
            self.line(f"{key.ljust(width)}  {'-' if value is None else value}")

#!/usr/bin/env python3
"""sleeper capsule: sleep N seconds, where N is the first number in the task (default 3600).

SIGTERM ends it promptly with status 0. When the task contains the word "stubborn" (or the
entrypoint is given ``--ignore-term``) SIGTERM is ignored instead, so only SIGKILL stops it —
the case the launcher's SIGTERM-then-SIGKILL escalation exists for.
"""

import os
import re
import signal
import sys
import time

DEFAULT_SECONDS = 3600.0


def parse(text: str) -> tuple[float, bool]:
    m = re.search(r"\d+(?:\.\d+)?", text)
    seconds = float(m.group(0)) if m else DEFAULT_SECONDS
    stubborn = re.search(r"\bstubborn\b", text, re.IGNORECASE) is not None
    return seconds, stubborn


def on_term(signum: int, frame: object) -> None:
    # Runs between any two bytecodes, possibly inside a print(): only async-signal-safe raw
    # writes here, then leave at once (every stdout line was already flushed).
    os.write(2, b"sleeper: SIGTERM received, exiting\n")
    os._exit(0)


def main(argv: list[str]) -> int:
    text = sys.stdin.read()
    seconds, stubborn = parse(text)
    stubborn = stubborn or "--ignore-term" in argv
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, on_term)
    mode = " (stubborn: ignoring SIGTERM)" if stubborn else ""
    print(f"sleeper: pid {os.getpid()} sleeping {seconds:g} seconds{mode}", flush=True)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 1.0))
    print(f"sleeper: slept {seconds:g} seconds", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

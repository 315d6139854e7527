#!/usr/bin/env python3
"""crasher capsule: fail on purpose, recognisably.

Writes a few ``crasher: ...`` lines to stderr, then exits with status 3. When the task contains
the word "signal" it kills itself with SIGSEGV instead (core dumps disabled first, so a test
run leaves no cores behind).
"""

import contextlib
import os
import re
import resource
import signal
import sys

EXIT_STATUS = 3


def main() -> int:
    text = sys.stdin.read().rstrip("\n")
    print("crasher: starting", flush=True)
    print("crasher: about to fail", file=sys.stderr)
    print(f"crasher: task was {text!r}", file=sys.stderr)
    if re.search(r"\bsignal\b", text, re.IGNORECASE):
        print("crasher: dying by SIGSEGV", file=sys.stderr, flush=True)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGSEGV)
    print(f"crasher: exiting with status {EXIT_STATUS}", file=sys.stderr, flush=True)
    return EXIT_STATUS


if __name__ == "__main__":
    sys.exit(main())

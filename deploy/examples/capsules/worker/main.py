#!/usr/bin/env python3
"""worker capsule: a small deterministic job on the task text, printed as a short report.

Same input, same output, byte for byte — so a test can assert on a delegation's result.
Writes nothing but its stdout.
"""

import sys


def report(text: str) -> str:
    words = text.split()
    lines = [
        "worker report",
        f"words: {len(words)}",
        f"lines: {len(text.splitlines())}",
        f"characters: {len(text)}",
        f"reversed: {' '.join(reversed(words))}",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    text = sys.stdin.read().rstrip("\n")
    sys.stdout.write(report(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())

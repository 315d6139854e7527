#!/usr/bin/env python3
"""echo capsule: print the task back as ``echo: <text>``.

The host runs this once per task with the task text on stdin and cwd = the session workdir.
The text is also written to ``share/last-task.txt`` (the directory this capsule exports as
peer files), so a peer can fetch what echo last saw through the peer plane.
"""

import os
import sys


def main() -> int:
    text = sys.stdin.read().rstrip("\n")
    sys.stdout.write(f"echo: {text}\n")
    sys.stdout.flush()
    try:
        os.makedirs("share", exist_ok=True)
        with open(os.path.join("share", "last-task.txt"), "w", encoding="utf-8") as f:
            f.write(text + "\n")
    except OSError as exc:  # the answer above is the task's output; the share file is a bonus
        print(f"echo: could not write share/last-task.txt: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

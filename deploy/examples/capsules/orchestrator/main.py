#!/usr/bin/env python3
"""orchestrator capsule: hand the task to worker@0.1.0 and print what it answers.

The delegation goes through ``roost-capsule delegate`` (the host puts it on PATH and it talks
to the host over MURMUR_HOST_SOCKET, which adds the session credential this script never sees).
``--task=<text>`` is passed as one word so a task starting with '-' is not read as an option.
"""

import subprocess
import sys

CHILD = "worker@0.1.0"


def objective(text: str) -> str:
    """The objective alone: a structured task (with instructions or context) arrives formatted as
    "Objective: …\n\n…", and worker gets its own input.json, which would format it again."""
    if text.startswith("Objective: "):
        return text[len("Objective: ") :].split("\n\n", 1)[0]
    return text


def main() -> int:
    task = objective(sys.stdin.read().rstrip("\n"))
    cmd = ["roost-capsule", "delegate", CHILD, f"--task={task}", "--wait"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        print("orchestrator: roost-capsule is not on PATH; run me under roost-capsule", file=sys.stderr)
        return 1
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        print(f"orchestrator: delegating to {CHILD} failed (exit {proc.returncode})", file=sys.stderr)
        return 1
    sys.stdout.write(proc.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One module per verb (circus style). Each module's docstring is its help text and its protocol:
the admin route it calls and the JSON it prints. Each exports ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(ctx, args) -> exit code``.
"""

from __future__ import annotations

__all__ = ["VERBS"]

# Order is the order of ``roostctl --help``.
VERBS = (
    "status",
    "sessions",
    "jobs",
    "job",
    "spawn",
    "cancel",
    "tree",
    "events",
    "logs",
    "drain",
    "keys",
    "config",
    "reconcile",
    "reload",
    "registry",
    "doctor",
    "dashboard",
    "completion",
)

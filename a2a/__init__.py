"""A2A protocol library: models, JSON-RPC envelope, traceparent, client and door.

Independent of ``roost``: nothing here imports from the daemon, so a capsule host or a test
can speak A2A without pulling the daemon in.
"""

__all__: list[str] = []

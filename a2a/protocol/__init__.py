"""The A2A protocol's values and rules, with no I/O: models, JSON-RPC, errors, ids, the agent
card, traceparent, origin and trust headers, seals, method names and task listing."""

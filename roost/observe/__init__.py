"""Observation: what the daemon says about what it does, for operators and their tools.

Observation events (spans with ids), Prometheus metrics, trace.jsonl lines and the sink that
writes them into sessions, event-loop probes and structured logs. It ranks with the state
layer: services emit into it, and it decides nothing about the work it observes.
"""

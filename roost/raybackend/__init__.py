"""The Ray process backend: children placed on a Ray cluster, one keeper actor per node.

Nothing in this package imports ``ray`` at module level except :mod:`roost.raybackend.cluster`,
which the daemon imports only when ``launcher = "ray"`` (docs/operations.md "Running with Ray").
"""

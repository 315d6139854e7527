"""The Ray process backend: children placed on a Ray cluster, one keeper actor per node.

Ray is imported only by the modules below this package, which the daemon imports only when
``launcher = "ray"`` (docs/operations.md "Running with Ray"). Importing the package first turns
off Ray's auto-connect: Ray reads ``RAY_ENABLE_AUTO_CONNECT`` once, when ``ray`` is first
imported, and with it on, any Ray call made before the daemon's own ``ray.init`` (say, while its
cluster is unreachable) would run a bare ``ray.init()`` that joins whatever cluster the machine
last started, or starts a new one.
"""

import os

os.environ["RAY_ENABLE_AUTO_CONNECT"] = "0"

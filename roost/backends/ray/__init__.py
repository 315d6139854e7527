"""The Ray process backend: children placed on a Ray cluster, one keeper actor per node.

Daemon side: the modules of this package. :mod:`.bundle` builds the backend's services for the
chooser (roost/backends/choose.py); :mod:`.backend` is the process backend, composed of
:mod:`.cluster`, :mod:`.keepers`, :mod:`.placer`, :mod:`.childdirs`, :mod:`.nodeartifacts` and
:mod:`.child`; :mod:`.peerfiles`, :mod:`.doors` and :mod:`.doorcalls` reach a session's files
and door on its node; :mod:`.settings` is the backend's section of the configuration. Node side:
:mod:`.node`, the code that runs in each node's keeper actor.

Ray is imported only by modules of this package, which the daemon imports only when
``launcher = "ray"`` (docs/operations.md "Running with Ray"). Importing the package first turns
off Ray's auto-connect: Ray reads ``RAY_ENABLE_AUTO_CONNECT`` once, when ``ray`` is first
imported, and with it on, any Ray call made before the daemon's own ``ray.init`` (say, while its
cluster is unreachable) would run a bare ``ray.init()`` that joins whatever cluster the machine
last started, or starts a new one.
"""

import os

os.environ["RAY_ENABLE_AUTO_CONNECT"] = "0"

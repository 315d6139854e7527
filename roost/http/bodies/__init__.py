"""Request bodies turned into typed requests at the edge: the one home of body parsing.

Why here and not in the services: a service takes typed values and never sees a raw JSON
object, so every body is checked once, by the route that read it, with the field readers of
:mod:`roost.core.fields` (one sentence per mistake, written once). One module per concern:
:mod:`.referee` (``/spawn``, ``/register``, ``/deregister``), :mod:`.jobs` (``POST /jobs``, on the
TCP port and the admin socket), :mod:`.relay` (``/a2a/*``), :mod:`.peer` (``/handles``,
``/peer-fetch``), :mod:`.admin` (the admin socket's own bodies).

Every parser is pure: no I/O (the checks that need the file system or the socket — a workdir
that exists, a pid that holds the connection — stay in the route, after parsing). The typed
requests are :mod:`roost.core.api_models`' where the parsed request is the published body, else
:mod:`roost.core.requests`' named tuples.
"""

"""The local backend: children on this host, their lifelines held by a small holder process.

Daemon side: :mod:`.backend` (the :class:`~roost.backends.base.ProcessBackend`), :mod:`.lifeline`
(the pipe, and starting and talking to the holder), :mod:`.sessionfiles` (the peer plane's file
work on this host's disk) and :mod:`.bundle` (the services the chooser gets). The other side:
:mod:`.holder`, the lifeline-holding process itself (``python -m roost.backends.local.holder``),
which imports only the standard library.
"""

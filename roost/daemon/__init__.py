"""The daemon: composition of every service, its life (start, serve, stop) and its listeners.

Nothing imports this package but the command line (:mod:`roost.cli`) and what it composes needs
(its lifecycle, start-up refusals, listeners); its ``__init__`` stays empty so importing a
module here never composes the daemon.
"""

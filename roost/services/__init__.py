"""Services: the daemon's behaviour, each built with what it uses (constructor injection).

The referee, the launcher, the peer plane, the relay, retention and the session watch. A service
imports the core, state, observation and system layers and the process backends' contract,
never an HTTP edge or the daemon that composes it.
"""

"""The admin API: an aiohttp app on an owner-only unix socket, driven by ``roostctl``.

Never on TCP: the socket's file mode (0600 in a 0700 directory) and a ``SO_PEERCRED`` check
on every request are the whole authentication, so there is no token to steal or leak.
"""

"""``roostctl``: the operator's command line over the daemon's admin socket.

Import-light on purpose: everything on the path of a daemon verb is stdlib (``http.client``
over ``AF_UNIX``, ``argparse``, ``json``), so ``roostctl status`` starts in a few tens of
milliseconds; aiohttp and pydantic are never imported by it. Only the ``registry`` verbs, which
work on the registry directly, import the registry and packer modules, and only when run.
"""

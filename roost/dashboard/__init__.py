"""``roostctl dashboard``: a live view of the delegation tree for operators, in a browser.

A small aiohttp server the operator runs as themself: it listens on loopback only, talks to the
daemon only through the admin unix socket (whose peer-uid check stays in force), and serves
plain server-rendered HTML with one small script for live updates (server-sent events). See
docs/operations.md ("Dashboard") for how its token, cookie and request checks work.
"""

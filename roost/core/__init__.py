"""The pure core: the values and decisions every layer shares, with no I/O.

Tokens, identifiers, manifests, the spawn envelope, network rules, admission and finalize
decisions, the job record and the API models. Nothing here opens a file, a socket or a process,
so each module is tested exhaustively on its own (unit and property tests, mutation testing for
the security core); every other layer may import it, and it imports nothing above itself.
"""

"""Process backends: where a job's child runs, behind one contract.

:mod:`.base` is the contract the launcher uses (start, watch, signal, re-adopt, a child's
directory); :mod:`.choose` picks a backend from the configuration and imports it lazily; each
backend is a package of its own (:mod:`.local`, :mod:`.ray`), and :mod:`.process` holds the
process work both do on a host. docs/architecture.md, "Process backends".
"""

"""Repositories: every SQL statement the daemon runs on its state, grouped by the table's owner.

Why: the tables are the durable side of in-memory state that one service owns (sessions, spent
approval ids and the reservation journal belong to the referee; jobs to the launcher). Keeping
the statements here, beside :mod:`roost.state.store` (which owns the connection, the schema and group
commit), means a column is renamed in one place and no other module reads a table behind its
owner's back. A repository builds :data:`~roost.state.store.Op` values for the store to commit, and
reads rows through it; it decides nothing.
"""

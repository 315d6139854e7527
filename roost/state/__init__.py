"""The state layer: what the daemon knows and keeps, in memory and in SQLite.

The configuration and settings in force, the key ring, the session table, the durable store and
its repositories, and the capsule registry. Services read and change state through these
objects; state never imports a service or an edge.
"""

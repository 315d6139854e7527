"""HTTP edges of the daemon: the peer-facing TCP app and its error mapping."""

"""The local backend: children on this host, their lifelines held by a small holder process."""

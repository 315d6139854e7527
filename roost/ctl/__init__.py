"""roostctl: the operator CLI over the daemon's admin socket."""

"""Peer plane: HMAC peer-file handles minted, redeemed and fetched by the daemon."""

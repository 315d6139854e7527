"""The node side of the Ray backend: code that runs inside each node's keeper actor, on that node."""

"""Process work on one host, shared by the local backend and a Ray node's keeper: a child's
command line and start, watching and stopping its process group, and its cgroup."""

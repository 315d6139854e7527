"""The host system, wrapped once: the executor, atomic files, peer credentials, process start
times, systemd notify, TLS trust for clients, periodic tasks and workdir ownership.

Each module is the one place its kind of system call is made, so the rules that go with it
(never block the loop, never follow a link, the kernel answers who is calling) hold everywhere.
It ranks with the state layer.
"""

"""roost-capsule: the reference capsule host that runs a script capsule as a full session."""

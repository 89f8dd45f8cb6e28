"""A run's record: the atomic store, experiment identity, provenance, and Horovod's timeline
and autotune logs, read the same way by the runner and the study tools."""

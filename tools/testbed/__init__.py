"""Machines simulated on this one, for the integration tests and the benches that measure
across hosts or without a network: ``netns`` (two namespace hosts with sshd), ``nodns`` (a
machine whose name server never answers)."""

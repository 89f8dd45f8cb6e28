"""Stands in for Horovod on a machine with only PyTorch and hvdscale (tests/run.sh's torchrun
phase): importing it fails as the import of a package that is not installed does."""

raise ImportError("No module named 'horovod' (tests/torchrun/nompi: this target has no Horovod)")

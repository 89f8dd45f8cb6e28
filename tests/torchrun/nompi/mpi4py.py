"""Stands in for mpi4py on a machine without MPI (tests/run.sh's torchrun phase puts this folder
first on PYTHONPATH): importing it fails as the import of a package that is not installed does."""

raise ImportError("No module named 'mpi4py' (tests/torchrun/nompi: this target has no MPI)")

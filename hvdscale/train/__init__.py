"""One training run on a rank, top to bottom: the runner, its step loop and its record."""

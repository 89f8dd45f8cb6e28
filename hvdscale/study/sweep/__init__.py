"""Sweeps and launches: a grid planned (``grid``, ``plan``, ``groups``), its rounds run by the one
driver (``driver``; several points in one launch: ``shared_launch``), every launch started by
``process`` on a line ``launcher`` builds; ``one_run`` is one run launched alone (the benches),
``timing`` and ``cost`` what the launches took. docs/architecture.md has the map."""

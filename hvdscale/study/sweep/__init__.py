"""``hvdscale sweep``: every (ranks, strategy) point as its own launch (``sweep``), through a
launcher (``launcher``) on the hosts of a hostfile (``hostfile``); ``names`` parses option lists."""

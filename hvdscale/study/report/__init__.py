"""The scaling report of a results directory: records grouped into points (``points``),
rendered as tables (``tables``, ``native_tables``) and plots (``scaling_plot``), each point's
loss of efficiency split into causes (``breakdown``, ``decompose``); ``report`` writes it."""

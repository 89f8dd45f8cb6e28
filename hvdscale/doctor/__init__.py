"""``hvdscale doctor``: check a machine (or every host of a launched job) before a run.

Gathering and judging are apart, so every decision can be tested on crafted facts:

* ``gather`` collects this rank's facts into a plain dict (``probe`` imports torch and
  TensorFlow, and loads Horovod's extensions, only in subprocesses with a time limit);
* ``software``, ``host``, ``network`` and ``cluster`` hold the checks, each a pure function
  from gathered facts to a ``Line`` (ok / warn / fail, with the fix in a few words);
* ``ranks`` compares the ranks' facts and lists what differs between ranks and hosts;
* ``bench`` times a short allreduce beside the bandwidth the link class should give;
* ``run`` puts it together on every rank; rank 0 prints (``report``).
"""

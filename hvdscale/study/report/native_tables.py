"""The report's answer to "Horovod or the framework's own data parallelism?": per framework and
RNN implementation, Horovod's words/s over DDP's (PyTorch) or MWMS's (TensorFlow) at each rank
count both were measured at, from the points' medians (the repeats' spread is in each series'
own table), paired by round where the points share rounds (``noise.ratio_cell``)."""

from __future__ import annotations

from hvdscale.registry import native_for
from hvdscale.study.paired.recommend import compare
from hvdscale.study.report.noise import ONE_ROUND, one_round, paired, ratio_cell, wps_cell
from hvdscale.study.report.points import Point


def _base(strategy: str) -> str:
    """``ddp (bucket_cap_mb=4)`` -> ``ddp``."""
    return strategy.split(" ")[0].split("-")[0]


def horovod_vs_native(series: dict[str, list[Point]], order: list[str]) -> str:
    """Rows of Horovod series against the framework's own series with the same implementation:
    words/s of each and the ratio horovod / native, per rank count (empty without such pairs).
    """
    rows = []
    for h_label in order:
        fw, impl, h = h_label.split(" / ", 2)
        own = native_for(fw)  # the framework's own data-parallel strategy, as labels name it
        if _base(h) != "horovod" or own is None:
            continue
        for n_label in order:
            fw2, impl2, nat = n_label.split(" / ", 2)
            if (fw2, impl2) != (fw, impl) or _base(nat) != own:
                continue
            mine = {p.ranks: p for p in series[h_label]}
            theirs = {p.ranks: p for p in series[n_label]}
            for ranks in sorted(set(mine) & set(theirs)):
                a, b = mine[ranks], theirs[ranks]
                verdict = (ONE_ROUND if one_round(a, b)
                           else compare("Horovod", "own", paired(a, b)))
                rows.append(f"|{fw}|{impl}|{h}|{nat}|{ranks}|{wps_cell(a)}|{wps_cell(b)}|"
                            f"{ratio_cell(a, b)}|{verdict}|")
    if not rows:
        return ""
    head = ["### Horovod or the framework's own data parallelism\n",
            "Horovod / own above 1: Horovod's words/s was higher in these runs. Whether that is "
            "beyond the noise takes paired rounds: from 3, the verdict says which is faster (by "
            "how much, with its 95% interval), that they differ by no more than 2%, or that "
            "it is undecided and how many more rounds would decide it; one run each has no "
            "spread to judge by.\n",
            "|Framework|RNN impl|Horovod|Framework's own|Ranks|Horovod words/s|"
            "Own words/s|Horovod / own|Verdict|", "|:--|:--|:--|:--|:--|:--|:--|:--|:--|"]
    return "\n".join(head + rows) + "\n\n"

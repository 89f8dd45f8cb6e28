"""Sweeps on the shaped link (issue 63): two namespace hosts, one rank each, Open MPI over TCP on
their veth pair only (tools/testbed/link.py), the pair limited with tbf at each rate
(tools/testbed/shaping.py). At each rate and round: ``hvdscale commbench`` on the link (the
network ``predict --comm`` reads), then per config one sweep at np=1,2 of horovod, ps, ddp and
independent and one of ps with two servers at np=2; every np=2 record is then predicted from
the link's commbench, from the rate alone, and from the fastest link's runs carried to it
(hvdscale/study/predict/on_link.py says how).

Rounds are interleaved: each round visits every rate once, the order reversed every other round.

    python bench/bench_shaped_sweep.py --rates 0.5,1,2.5 --rounds 3 \\
        --out bench/results/shaped_link.json
    python bench/bench_shaped_sweep.py --render bench/results/shaped_link.json

Needs root, ``ip``, ``tc`` and sshd.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import shaped_sweep_rows as rows_of  # bench/ is on sys.path when a script runs
from root_bench import run_as_root
from simulated import tools_package

from hvdscale.records.store import RESULTS_FILE
from hvdscale.study.predict import on_link

ROOT = Path(__file__).resolve().parents[1]
tools_package()  # tools/testbed from this checkout, as `python bench/...` runs from anywhere
from tools.testbed import link, shaping  # noqa: E402

STRATEGIES = "horovod,ps,ddp,independent"
COMM_TRANSPORTS = "p2p,mpi4py,horovod-mpi,ps"
COMM_SIZES = "4KB..16MB:x4"
LINK_BYTES = 16 << 20
"""The size the link's measured rate is read at: 0.27 s at 0.5 Gbit/s, so tbf's 4-ms burst
biases it by under 2 %."""


def _sweeps(h: Any, work: Path, config: str, sets: list[str], tag: str) -> tuple[list[Path],
                                                                               dict]:
    """One config's sweeps at one rate and round: np=1,2 of STRATEGIES, np=2 of ps x2."""
    main, ps2 = work / tag / "main", work / tag / "ps2"
    t0, load0 = time.time(), os.getloadavg()[0]
    link.sweep(h, main, str(ROOT / config), "1,2", STRATEGIES, sets)
    t1 = time.time()
    link.sweep(h, ps2, str(ROOT / config), "2", "ps", [*sets, "strategy.ps.num_servers=2"])
    return [main, ps2], {"sweep_wall_s": [t1 - t0, time.time() - t1],
                         "loadavg": [load0, os.getloadavg()[0]]}


def kept_at(kept: Path, k: int, rate: float) -> Path:
    """Where round ``k`` at ``rate`` keeps its records and commbench result under ``kept``."""
    return kept / f"r{k}_{rate:g}"


def _keep(src: Path, dest: Path) -> None:
    """Copy a sweep's records or a commbench's result (``src``'s RESULTS_FILE and
    commbench.json) to ``dest``: what the predictions can be made again from."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in (RESULTS_FILE, "commbench.json"):
        if (src / name).exists():
            shutil.copy(src / name, dest / name)


def measure(h: Any, work: Path, rate: float, k: int, args: argparse.Namespace) -> dict:
    """One rate in round ``k``: shape, commbench, every config's sweeps and predictions; the
    records and commbench result kept under ``args.keep_records``."""
    qdiscs = shaping.shape(h.ns, rate)
    comm = work / f"comm_r{k}_{rate}"
    t0, load0 = time.time(), os.getloadavg()[0]
    res = link.commbench(h, comm, COMM_TRANSPORTS, COMM_SIZES, repeats=5, warmup=1)
    keep = kept_at(Path(args.keep_records), k, rate)
    _keep(comm, keep / "comm")
    measured = link.link_gbit(res, "p2p")[LINK_BYTES]
    run: dict[str, Any] = {"rate_gbit": rate, "round": k, "qdisc": qdiscs,
                           "link_measured_gbit": measured,
                           "transports": link.transports_in_force(res, h.names),
                           "commbench_wall_s": time.time() - t0,
                           "loadavg": [load0, os.getloadavg()[0]],
                           "network": {t: res["transports"][t].get("link")
                                       for t in COMM_TRANSPORTS.split(",")},
                           "configs": {}, "rows": []}
    for cfg in args.configs.split(","):
        dirs, info = _sweeps(h, work, cfg, args.sets, f"{Path(cfg).stem}_r{k}_{rate}")
        for d in dirs:
            _keep(d, keep / Path(cfg).stem / d.name)
        run["configs"][cfg] = info
        run["loadavg"] += info["loadavg"]
        for r in on_link.predicted(str(ROOT / cfg), args.sets, dirs, comm, rate):
            run["rows"].append({"rate_gbit": rate, "link_measured_gbit": measured,
                                "config": cfg, "round": k, **r})
        run.setdefault("one_rank_words_per_s", {})[cfg] = on_link.one_rank_rates(dirs)
    return run


def fit_rows(raw: dict[str, Any], kept: Path) -> list[dict]:
    """The ``fit`` rows: each round's fastest-link sweep fitted and carried to its slower
    links (``predict --fit --fit-link``), from the records and commbench results under
    ``kept``; ps2 has no 1-rank run of its own to fit, so none."""
    out = []
    for k in sorted({r["round"] for r in raw["runs"]}):
        mine = [r for r in raw["runs"] if r["round"] == k]
        fast = max(mine, key=lambda r: r["rate_gbit"])
        top = kept_at(kept, k, fast["rate_gbit"])
        for run in (r for r in mine if r is not fast):
            here = kept_at(kept, k, run["rate_gbit"])
            for cfg in raw["configs"]:
                stem = Path(cfg).stem
                pred = on_link.fit_carried(str(ROOT / cfg), raw["sets"], top / stem / "main",
                                           top / "comm", here / "comm")
                for r in raw["rows"]:
                    if (r["how"], r["round"], r["rate_gbit"], r["config"]) == (
                            "unfitted", k, run["rate_gbit"], cfg) and r["strategy"] in pred:
                        out.append({**{x: r[x] for x in ("rate_gbit", "link_measured_gbit",
                                                         "config", "round", "strategy",
                                                         "measured_words_per_s")},
                                    "predicted_words_per_s": pred[r["strategy"]],
                                    "how": "fit"})
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every round over every rate (after those of ``--append``'s raw file, its rates and
    configs); the raw rows and what each measurement ran under."""
    rates = [shaping.check_rate(float(x)) for x in args.rates.split(",") if x.strip()]
    work = Path(tempfile.mkdtemp(prefix="s63-sweep-"))
    out: dict[str, Any] = {"kind": "shaped_link_sweep", "rates": rates, "rounds": 0,
                           "configs": args.configs.split(","), "sets": args.sets,
                           "strategies": STRATEGIES, "cores": os.cpu_count(),
                           "kernel_hz": shaping.kernel_hz(), "rows": [], "runs": []}
    if args.append:  # more rounds of the same design: its rates, configs and settings
        out = json.loads(Path(args.append).read_text())
        out["rows"] = [r for r in out["rows"] if r["how"] != "fit"]  # made again below
        rates, args.configs, args.sets = out["rates"], ",".join(out["configs"]), out["sets"]
    first = out["rounds"]
    if not args.keep_records:  # the fit rows are made from the kept records
        args.keep_records = str(work / "kept")
    with contextlib.ExitStack() as stack:
        if not args.keep:
            stack.callback(shutil.rmtree, work, True)
        h = stack.enter_context(link.ssh_hosts(work, str(os.getpid() % 10000), prefix="s63s",
                                                   pin=True))
        for k in range(first, first + args.rounds):
            for rate in (rates if k % 2 == 0 else rates[::-1]):
                t0 = time.time()
                m = measure(h, work, rate, k, args)
                m["wall_s"] = time.time() - t0
                out["rows"] += m.pop("rows")
                out["runs"].append(m)
                out["rounds"] = k + 1
                print(f"round {k} rate {rate}: link {m['link_measured_gbit']:.3f} Gbit/s, "
                      f"{m['wall_s']:.0f} s", flush=True)
        shaping.unshape(h.ns)
        out["rows"] += fit_rows(out, Path(args.keep_records))
    out["mpi_transports"] = ("Open MPI btl tcp,self, btl_tcp_if_include and oob_tcp_if_include "
                             f"{shaping.DEV}: TCP over the veth link only, one rank a host")
    if args.keep:
        out["work"] = str(work)
    return out


def recompute(raw: dict[str, Any], kept: Path) -> dict[str, Any]:
    """``raw`` with every row made again from the records and commbench results kept under
    ``kept`` (``--keep-records``): the predictions, by today's model."""
    rows = []
    for run in raw["runs"]:
        k, rate = run["round"], run["rate_gbit"]
        here = kept_at(kept, k, rate)
        for cfg in raw["configs"]:
            dirs = [here / Path(cfg).stem / d for d in ("main", "ps2")]
            for r in on_link.predicted(str(ROOT / cfg), raw["sets"], dirs, here / "comm", rate):
                rows.append({"rate_gbit": rate, "link_measured_gbit": run["link_measured_gbit"],
                             "config": cfg, "round": k, **r})
    for run in raw["runs"]:
        run.pop("split", None)  # the earlier fit's input, now made from the records
    raw = {**raw, "rows": rows}
    return {**raw, "rows": rows + fit_rows(raw, kept)}


def main() -> int:
    """Run the rounds (or ``--render`` a raw file); print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="0.5,1,2.5", help="Gbit/s, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", default="configs/demo.yaml,configs/commheavy_torch.yaml")
    ap.add_argument("--set", dest="sets", action="append",
                    default=["measure.warmup_steps=5", "measure.steps=60"])
    ap.add_argument("--keep", action="store_true", help="keep the whole scratch directory")
    ap.add_argument("--keep-records", default="", metavar="DIR",
                    help="copy every sweep's records and commbench result under DIR "
                         "(default: the scratch directory, removed at the end)")
    ap.add_argument("--append", default="", metavar="RAW.json",
                    help="run --rounds more rounds after those of this raw file (its rates, "
                         "configs and settings) and write them all")
    ap.add_argument("--out", default="", help="write the raw JSON here")
    ap.add_argument("--render", metavar="RAW.json", help="print the table from a raw file")
    ap.add_argument("--recompute", metavar="RAW.json",
                    help="make the raw file's predictions again from --keep-records DIR")
    args = ap.parse_args()
    if args.recompute:
        raw = recompute(json.loads(Path(args.recompute).read_text()), Path(args.keep_records))
        Path(args.recompute).write_text(json.dumps(raw, indent=1) + "\n")
        print(rows_of.render(raw), end="")
        return 0
    if args.render:
        print(rows_of.render(json.loads(Path(args.render).read_text())), end="")
        return 0
    return run_as_root("bench_shaped_sweep", lambda: run(args), rows_of.render, args.out)


if __name__ == "__main__":
    raise SystemExit(main())

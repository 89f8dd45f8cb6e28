"""Own-run validation of ``predict --fit`` (issue 21): measure np = 1..4 for horovod, ps and
independent on two configs, fit on n <= 2, predict n = 3 and 4, compare with the measurement.

The ranks run on two hosts made on this machine (network namespaces joined by a veth pair, sshd
in each: tools/testbed/netns.py), two slots each, so np = 3 and 4 span both hosts; both
"hosts" share this machine's cores, so points with more rank threads than cores are named
``oversubscribed`` in the raw file. Rounds are interleaved: each round sweeps every config,
strategy and n once (the sweep's order: n-major, strategies alternating), and the 1-minute load
average is recorded before and after every round. Per round, the fit on that round's n <= 2
predicts its n = 3, 4: the paired ratio predicted / measured, median and min-max over rounds.

    python bench/bench_predict_validate.py --rounds 2 --out bench/results/predict_validate.json
    python bench/bench_predict_validate.py --render bench/results/predict_validate.json

Needs root (network namespaces) and sshd.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scratch import scratch_dir  # bench/ is on sys.path when a script runs
from simulated import testbed

from hvdscale.records.run import RunRecord
from hvdscale.records.store import read_records
from hvdscale.study.predict.validate import evaluate

ROOT = Path(__file__).resolve().parents[1]

CONFIGS = ("configs/demo.yaml", "configs/commheavy_torch.yaml")
STRATEGIES = "horovod,ps,independent"
SETS = ["measure.warmup_steps=3", "measure.steps=12", "data.synthetic.sentences_per_rank=256"]
QUIET_LOAD = 2.5


def _sweep(hosts: Any, config: str, nps: str, out: Path, extra: list[str]) -> str:
    """One sweep of ``config`` on the two namespace hosts (mpirun through ssh)."""
    # sshd needs its privilege-separation dir at every connection; another user of
    # tests/integration/cluster.sshd_privsep may have removed it meanwhile.
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    hostfile = out / "hosts"
    hostfile.write_text(f"{hosts.addr[0]} slots=2\n{hosts.addr[1]} slots=2\n")
    argv = [sys.executable, "-m", "hvdscale", "sweep", str(ROOT / config), "--np", nps,
            "--strategies", STRATEGIES, "--hostfile", str(hostfile), "--network-interfaces",
            "hvd0", "--out", str(out), "--timeout", "300", "--no-plot", "--redo", *extra]
    for s in SETS:
        argv += ["--set", s]
    env = "TF_CPP_MIN_LOG_LEVEL=2"  # the sweep's launch_env allows root itself
    if os.environ.get("PYTHONPATH"):  # the caller's import path, for the sweep and its ranks
        env += f" PYTHONPATH={shlex.quote(os.environ['PYTHONPATH'])}"
    script = f"cd {ROOT} && env {env} " + " ".join(shlex.quote(a) for a in argv)
    r = subprocess.run(hosts.in_first(script), capture_output=True, text=True, timeout=3000)
    if r.returncode != 0:
        raise SystemExit(f"sweep failed ({config}):\n{r.stdout[-4000:]}{r.stderr[-4000:]}")
    return r.stdout


def _start_sshd(hosts: Any, work: Path, sh: Any) -> None:
    """sshd in each namespace host, unless its pidfile names a live process."""
    for ns, name in zip(hosts.ns, hosts.names, strict=True):
        pidfile = work / f"sshd_{name}.pid"
        try:
            os.kill(int(pidfile.read_text().split()[0]), 0)
            continue
        except (OSError, ValueError, IndexError):
            pass
        conf = work / f"sshd_{name}.conf"
        sh("ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
           f"hostname {name} && exec /usr/sbin/sshd -f {conf} -E {work / f'sshd_{name}.log'}")
    time.sleep(1)


def _nps(max_np: int) -> str:
    """Every rank count the sweeps run, 1..max_np, as ``--np`` takes them."""
    return ",".join(str(n) for n in range(1, max_np + 1))


def _hosts(work: Path) -> Any:
    """The two namespace hosts (not yet made), under names and a subnet of their own."""
    netns = testbed("netns")  # the same hosts the tests make
    h = netns.TwoHosts(work, str(os.getpid() % 10000))
    # own names and subnet (10.100-149.x), apart from test_netns's (200) and slurm's (150)
    pair = netns.host_pair(str(os.getpid() % 10000), "hvdpv", "hvp", "hvdpv", 100)
    h.ns, h.veth, h.addr, h.names = (pair[k] for k in ("ns", "veth", "addr", "names"))
    return h


def _make_hosts(h: Any, work: Path) -> None:
    """The hosts' namespaces, veth pair, ssh keys, sshd configs and sshd processes."""
    netns = testbed("netns")
    netns.veth_hosts(h.ns, h.veth, h.addr)
    netns.ssh_keys(work, h.addr)
    for addr, name in zip(h.addr, h.names, strict=True):
        conf = work / f"sshd_{name}.conf"
        conf.write_text(netns.sshd_config(work, addr, work / f"sshd_{name}.pid"))
    _start_sshd(h, work, netns.sh)


def _round(k: int, h: Any, work: Path, args: argparse.Namespace, extra: list[str]
           ) -> dict[str, Any]:
    """Round ``k``: every config swept (order alternating per round), fitted and compared."""
    from hvdscale.config import load_config
    from hvdscale.study.predict.inputs import reduced_bytes_per_step

    rnd: dict[str, Any] = {"round": k, "loadavg_before": os.getloadavg()[0], "rows": {}}
    order = list(args.configs) if k % 2 == 0 else list(reversed(args.configs))
    for config in order:
        _start_sshd(h, work, testbed("netns").sh)  # again, if something ended it meanwhile
        out = work / f"round{k}" / Path(config).stem
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        _sweep(h, config, _nps(args.max_np), out, extra)
        recs = [r for r in read_records(out) if isinstance(r, RunRecord)]
        nbytes = reduced_bytes_per_step(load_config(str(ROOT / config), SETS))
        rnd["rows"][config] = evaluate(recs, args.fit_max, list(range(1, args.max_np + 1)),
                                       nbytes)
        rnd.setdefault("sweep_s", {})[config] = time.time() - t0
        rnd.setdefault("loadavg_after_config", {})[config] = os.getloadavg()[0]
    rnd["loadavg_after"] = os.getloadavg()[0]
    return rnd


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every round: both configs swept on the two hosts, load recorded, fitted, compared."""
    work = scratch_dir(args.work, "hvdscale-predict-validate-")
    h = _hosts(work)
    extra = ["--launcher-args", args.launcher_args] if args.launcher_args else []
    result: dict[str, Any] = {"kind": "predict_validate", "np": _nps(args.max_np),
                              "fit_max": args.fit_max, "configs": list(args.configs),
                              "sets": SETS, "rounds": [], "cores": os.cpu_count()}
    with testbed("netns").sshd_privsep():
        try:
            _make_hosts(h, work)
            for k in range(args.rounds):
                rnd = _round(k, h, work, args, extra)
                result["rounds"].append(rnd)
                print(f"round {k}: done (load {rnd['loadavg_before']:.2f} -> "
                      f"{rnd['loadavg_after']:.2f})", flush=True)
        finally:
            testbed("netns").remove_hosts(h.ns, h.veth)
    return _label_load(result)


def _label_load(result: dict[str, Any]) -> dict[str, Any]:
    """``max_load`` and ``quiet`` (every recorded 1-minute load <= QUIET_LOAD)."""
    loads = [x for r in result["rounds"] for x in (r["loadavg_before"], r["loadavg_after"],
                                                   *r["loadavg_after_config"].values())]
    result["max_load"] = max(loads) if loads else None
    result["quiet"] = bool(loads) and max(loads) <= QUIET_LOAD
    return result


def render(raw: dict[str, Any]) -> str:
    """The BENCHMARKS.md table, from the raw file only."""
    cells: dict[tuple[str, str, int], list[dict]] = {}
    for rnd in raw["rounds"]:
        for config, rows in rnd["rows"].items():
            for r in rows:
                cells.setdefault((config, r["strategy"], r["n"]), []).append(r)
    lines = [f"Fit on n <= {raw['fit_max']}, predict larger n; {len(raw['rounds'])} interleaved "
             f"round(s); max 1-minute load {raw['max_load']:.2f}, quiet: "
             f"{'yes' if raw['quiet'] else 'no'}.", "",
             "| config | strategy | n | family | measured words/s | predicted words/s | "
             "error % (median) | ratio min-max | within 10 % | most wrong term | "
             "oversubscribed |", "|:--|:--|--:|:--|--:|--:|--:|:--|:--|:--|:--|"]
    for (config, s, n), rows in sorted(cells.items()):
        ratios = [r["ratio"] for r in rows]
        med = statistics.median(ratios)
        err = 100 * (med - 1)
        wrong = statistics.mode(r["most_wrong_term"] for r in rows)
        lines.append(f"| {Path(config).stem} | {s} | {n} | {rows[0]['family']} | "
                     f"{statistics.median(r['measured_words_per_s'] for r in rows):.0f} | "
                     f"{statistics.median(r['predicted_words_per_s'] for r in rows):.0f} | "
                     f"{err:+.1f} | {min(ratios):.3f}-{max(ratios):.3f} | "
                     f"{'yes' if abs(err) <= 10 else 'no'} | "
                     f"{wrong if abs(err) > 10 else '-'} | "
                     f"{'yes' if rows[0]['oversubscribed'] else 'no'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    """Run the rounds (or ``--render`` a raw file); print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--render", metavar="RAW.json", help="print the table from a raw file")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-np", type=int, default=4)
    ap.add_argument("--fit-max", type=int, default=2)
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS))
    ap.add_argument("--work", default=None, help="scratch directory (ssh keys, sshd configs, "
                    "sweeps; default: a fresh private temporary one)")
    ap.add_argument("--launcher-args", default="", help="passed to each sweep")
    ap.add_argument("--out", default="", help="write the raw JSON here")
    args = ap.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return 0
    res = run(args)
    text = json.dumps(res, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(render(res), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

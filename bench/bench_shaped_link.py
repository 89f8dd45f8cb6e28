"""Does the shaped link hold its rate? Two namespace hosts (tools/testbed/link.py), one rank
each, Open MPI over TCP on their veth link only, the link limited with tbf at each rate
(tools/testbed/shaping.py); ``hvdscale commbench`` measures a point-to-point ping-pong and
mpi4py's allreduce across it, and tc's counters say how many bytes crossed each way.

Rounds are interleaved (each round visits every rate once, the order reversed every other
round). One message size per rate, about 0.25 s of the rate, so tbf's burst (4 ms of the
rate, let through at once by an idle link) biases a message's time by under 2 %.

    python bench/bench_shaped_link.py --rates 0.5,1,2.5,unshaped --rounds 3 \\
        --out bench/results/shaped_link_check.json

Needs root, ``ip``, ``tc`` and sshd.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from simulated import tools_package

ROOT = Path(__file__).resolve().parents[1]
tools_package()  # tools/testbed from this checkout, as `python bench/...` runs from anywhere
from tools.testbed import link, shaping  # noqa: E402

# A TCP segment on a 1500-byte MTU carries 1448 bytes of payload (20 IP + 20 TCP + 12 of
# timestamp options) in a 1514-byte frame (14 Ethernet): tbf counts the frame.
PAYLOAD_SHARE = 1448 / 1514
MESSAGE_S = 0.25


def parse_rates(text: str) -> list[float | None]:
    """``"0.5,1,unshaped"`` -> [0.5, 1.0, None]; a rate that is not positive is refused."""
    out: list[float | None] = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        out.append(None if item == "unshaped" else shaping.check_rate(item))
    if not out:
        raise ValueError("--rates needs at least one rate (Gbit/s) or 'unshaped'")
    return out


def message_bytes(rate_gbit: float | None) -> int:
    """A power of two of bytes near MESSAGE_S of the rate (64 MiB unshaped), >= 1 MiB."""
    if rate_gbit is None:
        return 64 << 20
    target = rate_gbit * 1e9 / 8 * MESSAGE_S
    return max(1 << 20, 1 << round(math.log2(target)))


def measure(h: Any, work: Path, rate: float | None, k: int) -> dict[str, Any]:
    """One rate in round ``k``: shape (or unshape), commbench p2p and allreduce, read tc."""
    if rate is None:
        shaping.unshape(h.ns)
    qdiscs = shaping.shape(h.ns, rate) if rate else [shaping.qdisc(n) for n in h.ns]
    size = message_bytes(rate)
    before = shaping.sent_bytes(h.ns)
    res = link.commbench(h, work / f"r{k}_{rate}", "p2p,mpi4py", str(size))
    after = shaping.sent_bytes(h.ns)
    rows = []
    for what, tr in (("p2p", "p2p"), ("allreduce", "mpi4py")):
        rows.append({"rate_gbit": rate, "link_measured_gbit": link.link_gbit(res, tr)[size],
                     "link_best_gbit": link.best_link_gbit(res, tr)[size],
                     "what": what, "bytes": size, "round": k,
                     "expected_gbit": rate * PAYLOAD_SHARE if rate else None,
                     "repeats": res["transports"][tr]["points"][0]["repeats"] + 1})  # + warmup
    return {"rows": rows, "qdisc": qdiscs, "tc_sent_bytes_per_direction":
            [a - b for a, b in zip(after, before, strict=True)],
            "transports": link.transports_in_force(res, h.names),
            "mpi_library": (res["versions"].get("mpi") or "").rstrip("\x00"),
            "loadavg": res["jobs"]["mpirun"]["loadavg"]}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every round over every rate; the raw rows and what each measurement ran under."""
    import tempfile

    rates = parse_rates(args.rates)
    work = Path(tempfile.mkdtemp(prefix="s63-link-"))
    out: dict[str, Any] = {"kind": "shaped_link_check", "rates": rates, "rounds": args.rounds,
                           "payload_share": PAYLOAD_SHARE, "tbf_latency_ms": shaping.LATENCY_MS,
                           "kernel_hz": shaping.kernel_hz(), "cores": os.cpu_count(),
                           "burst_bytes": {str(r): shaping.tbf_burst(r) for r in rates if r},
                           "rows": [], "runs": []}
    with contextlib.ExitStack() as stack:
        # the scratch (ssh keys, commbench outputs) goes after the hosts: the rows are kept
        stack.callback(shutil.rmtree, work, True)
        h = stack.enter_context(link.ssh_hosts(work, str(os.getpid() % 10000), prefix="s63b"))
        for k in range(args.rounds):
            for rate in (rates if k % 2 == 0 else rates[::-1]):
                t0 = time.time()
                m = measure(h, work, rate, k)
                out["rows"] += m.pop("rows")
                out["runs"].append({"rate_gbit": rate, "round": k, "wall_s": time.time() - t0,
                                    **m})
                print(f"round {k} rate {rate}: " + ", ".join(
                    f"{r['what']} {r['link_measured_gbit']:.3f}" for r in out["rows"][-2:]),
                    flush=True)
        shaping.unshape(h.ns)
    out["mpi_library"] = out["runs"][0]["mpi_library"] if out["runs"] else None
    out["mpi_transports"] = ("Open MPI btl tcp,self, btl_tcp_if_include and oob_tcp_if_include "
                             f"{shaping.DEV}: TCP over the veth link only, one rank a host")
    return out


def render(raw: dict[str, Any]) -> str:
    """Set rate against the median (min-max) measured per kind, from the raw file only."""
    lines = ["| set Gbit/s | what | message | measured Gbit/s, median (min-max) | "
             "of set rate | fastest repeat, median | rounds |", "|--:|:--|--:|:--|--:|--:|--:|"]
    for rate in raw["rates"]:
        for what in ("p2p", "allreduce"):
            rows = [r for r in raw["rows"] if r["rate_gbit"] == rate and r["what"] == what]
            if not rows:
                continue
            got = [r["link_measured_gbit"] for r in rows]
            med = statistics.median(got)
            share = f"{100 * med / rate:.1f} %" if rate else "-"
            lines.append(f"| {rate if rate else 'unshaped'} | {what} | {rows[0]['bytes'] >> 20}"
                         f" MiB | {med:.3f} ({min(got):.3f}-{max(got):.3f}) | {share} | "
                         f"{statistics.median(r['link_best_gbit'] for r in rows):.3f} | "
                         f"{len(rows)} |")
    loads = [x for run in raw["runs"] for x in run["loadavg"][:1]]
    lines += ["", f"{raw['rounds']} interleaved rounds; {raw['cores']} cores; 1-minute load "
              f"during the runs {min(loads):.2f}-{max(loads):.2f}; {raw['mpi_transports']}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    """Run the rounds (or ``--render`` a raw file); print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="0.5,1,2.5,unshaped",
                    help="Gbit/s, comma-separated; 'unshaped' for no limit")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="", help="write the raw JSON here")
    ap.add_argument("--render", metavar="RAW.json", help="print the table from a raw file")
    args = ap.parse_args()
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return 0
    try:
        parse_rates(args.rates)
    except ValueError as e:
        print(f"bench_shaped_link: {e}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("bench_shaped_link: needs root (network namespaces, tc)", file=sys.stderr)
        return 2
    try:
        res = run(args)
    except AssertionError as e:  # a failed command or a link not as set: its own message
        print(f"bench_shaped_link: {e}", file=sys.stderr)
        return 1
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(render(res), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""BENCHMARKS.md's hand-written sections measured on the development machine (issues 3 to 41),
recomputed from their raw results in ``bench/results/``: ``check_benchmarks.py`` calls each
function of ``SECTION_CHECKS`` with its raw files' contents and looks for every returned line in
the text. Loads and the quiet label are recomputed from the loads a raw file recorded
(``emit.quiet_label``), never read from its stored summary.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable

from emit import quiet_label  # bench/ is on sys.path (check_benchmarks puts it there)


class FigureError(Exception):
    """A check found nothing to compare (its raw file does not hold what it reads)."""


def _ms(s: float, spec: str = ".2f") -> str:
    return format(1e3 * s, spec)


ISSUE3_RUNS = ("overhead_issue24.json", "overhead_issue24_run2.json",
               "overhead_issue24_run3.json", "overhead_issue24_run4.json")


def issue3_overhead_row(name: str, d: dict) -> str:
    """One run's row of issue 3's harness-overhead table; load and quiet recomputed."""
    m, (lo, hi) = d["median_step_s"], d["overhead_pct_paired_rounds_range"]
    q = quiet_label(d)
    return (f"| `{name}` | {d['rounds']} | {_ms(m['minimal'])} | {_ms(m['hvdscale'])} | "
            f"{d['overhead_pct']:+.1f} % | {d['overhead_pct_paired_rounds']:+.1f} % "
            f"({lo:+.1f}..{hi:+.1f}) | {q['load_1min_max']:.2f} | "
            f"{'yes' if q['quiet'] else 'no'} |")


def issue3_overhead(*runs: dict) -> list[str]:
    """Issue 3's harness-overhead table, a row per run."""
    return [issue3_overhead_row(n, d) for n, d in zip(ISSUE3_RUNS, runs, strict=True)]


def launch_medians(d: dict) -> dict[str, float]:
    """Median words/s per strategy over the raw file's ``launches`` (one record per launch),
    never its stored medians; every strategy must have the same number of launches."""
    runs: dict[str, list[float]] = {}
    for launch in d["launches"]:
        runs.setdefault(launch["strategy"], []).append(float(launch["words_per_s"]))
    if len({len(v) for v in runs.values()}) != 1:
        raise FigureError(f"launches per strategy differ: {({k: len(v) for k, v in runs.items()})}")
    return {k: statistics.median(v) for k, v in runs.items()}


def issue3_strategies(d: dict) -> list[str]:
    """Issue 3's strategies table: words/s medians and their ratios recomputed from the
    launches. The median step time is the one figure the launches do not hold (the bench
    keeps only its median per strategy), so it is read as stored."""
    w, s = launch_medians(d), d["median_step_ms"]
    ind = w["independent"]
    return [f"| independent | {ind:.0f} | {s['independent']:.1f} | 1.000 |",
            f"| horovod | {w['horovod']:.0f} | {s['horovod']:.1f} | "
            f"**{w['horovod'] / ind:.3f}** |",
            f"| ps | {w['ps']:.0f} | {s['ps']:.1f} | {w['ps'] / ind:.3f} |",
            # Issue 62: "ps / horovod 1.02" of one run is withdrawn; the paired verdict is
            # check_verdicts.CLAIMS' (5 rounds of issue 53's precision run).
            f"reached {w['ps'] / ind:.3f} in this one run", _load_phrase(d)]


def _load_phrase(d: dict) -> str:
    """How the text states the load of a run, from the loads its raw file recorded."""
    q = quiet_label(d)
    if q["quiet_basis"].startswith("one reading at the end"):
        return f"one reading, at the end: 1-minute load {q['load_1min_max']:.2f}; not quiet"
    return (f"every 1-minute load <= {q['load_1min_max']:.2f}, "
            f"{'quiet' if q['quiet'] else 'not quiet'}")


def issue4_ps(d: dict) -> list[str]:
    """Issue 4's parameter-server rows and Horovod's allreduce time at that np."""
    np_ = "2" if d["ranks"] == 2 else f"{d['ranks']}*"
    out = [f"{_ms(d['horovod_allreduce_median_s'], '.1f')} ms at np={np_}"]
    for p in d["ps"]:
        c, pr, u = p["comm_median_s"], p["predicted_s"], p["server_update_median_s"]
        out.append(f"| {np_} | {p['placement']} | {p['servers']} | {p['workers']} | "
                   f"{_ms(c, '.1f')} | {_ms(pr, '.1f')} | {_ms(u, '.1f')} | {c / pr:.2f} | "
                   f"{(c - u) / pr:.2f} |")
    return out


def issue6_soak(d: dict) -> list[str]:
    """Issue 6's soak: memory per rank, the step-time deciles and words/s."""
    out = [f"| {m['rank']} | {m['rss_first_mb']:.1f} | {m['rss_last_mb']:.1f} | "
           f"{m['peak_rss_mb']:.1f} |" for m in d["memory"]]
    deciles = ", ".join(f"{x:.1f}" for x in d["step_time_decile_medians_ms"])
    return [*out, deciles, f"= {d['last_over_first_decile']:.2f}, no drift",
            f"{d['words_per_s']:.0f} words/s over the 1,000 steps"]


def issue10_frameworks(d: dict) -> list[str]:
    """Issue 10's frameworks table: fused vs loop, horovod vs independent, embeddings."""
    w = d["median_words_per_s"]
    out = [f"| {fw}, np={n} | {w[f'{fw} fused np={n}']:.0f} | {w[f'{fw} loop np={n}']:.0f} | "
           f"{w[f'{fw} loop np={n}'] / w[f'{fw} fused np={n}']:.2f} |"
           for n in (1, 2) for fw in ("torch", "tf")]
    for fw, bold in (("tf", "**"), ("torch", "")):
        ind = w[f"{fw} fused np=2 independent"]
        out.append(f"| {bold}{fw} horovod / {fw} independent, np=2{bold} | "
                   f"{bold}{w[f'{fw} fused np=2'] / ind:.2f}{bold} ({ind:.0f} words/s "
                   f"independent) |")
    out.append(f"| tf embedding gradients gathered / dense, np=2 | "
               f"{w['tf fused np=2 embeddings gathered'] / w['tf fused np=2']:.3f} |")
    return out


def overhead_tf(d: dict) -> list[str]:
    """Issue 10's TF harness-overhead rows."""
    m = d["median_step_s"]
    return [f"| minimal DistributedGradientTape loop | {_ms(m['minimal'], '.1f')} |",
            f"| hvdscale TF `horovod` | {_ms(m['hvdscale'], '.1f')} |",
            f"| **overhead** | **+{d['overhead_pct']:.1f} %** (paired rounds: "
            f"+{d['overhead_pct_paired_rounds']:.1f} %"]


def issue16_work_split(d: dict) -> list[str]:
    """Issue 16's idle implied by the work split, per bucketing mode."""
    rows = {"per_rank": "bucketed, per_rank", "aligned": "bucketed, aligned"}
    out = [f"| {name} | {d[f'fused: {k}']['steps']} | {d[f'fused: {k}']['idle_pct']:.1f} % | "
           f"{d[f'loop: {k}']['idle_pct']:.1f} % |" for name, k in rows.items()]
    g = "bucketed, global"
    out.append(f"| **global** | {d[f'fused: {g}']['steps']} | "
               f"**{d[f'fused: {g}']['idle_pct']:.1f} %** | "
               f"**{d[f'loop: {g}']['idle_pct']:.1f} %** |")
    return out


def issue16_timed(d: dict) -> list[str]:
    """Issue 16's timed straggler rows at np=2."""
    s = d["straggler"]
    out = []
    for rnn in ("fused", "loop"):
        pr, gl = s[f"{rnn}: bucketed, per_rank"], s[f"{rnn}: bucketed, global"]
        out.append(f"| np=2, {rnn} | "
                   f"{d[f'throughput_np2_{rnn}']['pad to max']['words_per_s']:.0f} | "
                   f"{pr['words_per_s']:.0f} ({pr['idle_pct']:.1f} %) | "
                   f"{gl['words_per_s']:.0f} (**{gl['idle_pct']:.1f} %**) |")
    return out


def _pct(x: float) -> str:
    return f"{x:+.1f} %".replace("-", "\u2212")  # the table prints a minus sign


def issue17_overhead(*runs: dict) -> list[str]:
    """Issue 17's table, one column per run (run 1, run 2): each row checked whole."""
    def row(label: str, cell: Callable[[dict], str]) -> str:
        return f"| {label} | " + " | ".join(cell(d) for d in runs) + " |"

    def iqr(d: dict) -> str:
        lo, hi = d["progress_ratio_paired_rounds_iqr"]
        return f"**{d['progress_ratio_paired_rounds']:.3f}** ({lo:.2f}\u2013{hi:.2f})"

    return [row("minimal Horovod loop", lambda d: _ms(d["median_step_s"]["minimal"], ".1f")),
            row("hvdscale without progress (before)",
                lambda d: _ms(d["median_step_s"]["hvdscale_no_progress"], ".1f")),
            row("hvdscale with progress", lambda d: _ms(d["median_step_s"]["hvdscale"], ".1f")),
            row("with / without progress, ratio of medians",
                lambda d: f"{d['progress_ratio']:.3f}"),
            row(f"with / without progress, median of {runs[0]['rounds']} paired rounds (IQR)",
                iqr),
            row("hvdscale (with progress) vs minimal", lambda d: _pct(d["overhead_pct"])),
            row("hvdscale without progress vs minimal",
                lambda d: _pct(d["overhead_pct_without_progress"]))]


def issue14_seed(d: dict) -> list[str]:
    """Issue 14's predicted efficiencies of the seed NMT at 8, 64 and 512 ranks."""
    names = {"ring-overlap": "ring allreduce, overlapped", "ring": "ring allreduce, no overlap",
             "ps-dedicated": "PS, 1 dedicated server", "ps-sharded": "PS, colocated sharded"}
    out = []
    for bw, label in (("25Gbit", "25 Gbit/s"), ("100Gbit", "100 Gbit/s")):
        eff = d["seed_nmt"][bw]["efficiency_pct"]["weak"]
        for key, name in names.items():
            cells = " | ".join(f"{eff[key][r]:.1f} %" for r in ("8", "64", "512"))
            out.append(f"| {label} | {name} | {cells} |")
    mb = {v["fusion_threshold_bytes"] / 2**20 for v in d["seed_nmt"].values()
          if "fusion_threshold_bytes" in v} or {d["assumptions"]["fusion_threshold_MB"]}
    return [*out, f"default fusion threshold, {max(mb):g} MiB"]


def issue12_demo_goal(d: dict) -> list[str]:
    """Horovod's defaults over independent replicas, paired per round (the goal's figure)."""
    rows = {r["label"]: r["words_per_s_all"] for r in d["table"]}
    # A failed round is None on its side: only rounds both ran are paired.
    ratios = [a / b for a, b in zip(rows["128MB/1ms/hooks"], rows["independent"], strict=True)
              if a is not None and b is not None]
    return [f"measured {sorted(ratios)[len(ratios) // 2]:.3f} (rounds "
            f"{', '.join(f'{x:.2f}' for x in ratios)})"]


def issue12_commheavy(d: dict) -> list[str]:
    """Issue 12's comm-heavy fusion rows against independent and Horovod's defaults."""
    rows = {r["label"]: r["words_per_s"] for r in d["table"]}
    ind, dfl = rows["independent"], rows["128MB/1ms/hooks"]
    labels = {"default/5ms/after-backward": "after-backward, 5 ms (highest words/s)",
              "default/1ms/after-backward": "after-backward, 1 ms",
              "0MB/1ms/hooks": "fusion off (0 MiB, 1 ms, hooks)",
              "128MB/5ms/hooks": "128 MiB, 5 ms, hooks"}
    return [f"| {label} | {rows[k]:.0f} | {rows[k] / ind:.2f} | {rows[k] / dfl:.2f} |"
            for k, label in labels.items()]


def issue15_gemm(md: str) -> list[str]:
    """NT and TN against their pre-transposed twins, as the gemm tool's findings count them."""
    out = []
    for fw, h, v, n, med in re.findall(r"- (\w+) hidden (\d+): (NT|TN) is [^(]*\((\d+)/13 "
                                       r"batch sizes[^;]*; x([\d.]+) median\)", md):
        out.append(f"{fw} {h} {v}: {n}/13" if v == "NT" else f"x{med} ({fw} {h})")
    if not out:
        raise FigureError("no NT/TN finding line matched in gemm.md (format changed?)")
    return out


ISSUE20_REVISIONS = (("torch, horovod", "revisions_issue20_torch.json"),
                     ("tf, horovod", "revisions_issue20_tf.json"),
                     ("torch, ps (colocated, 1 server)", "revisions_issue20_torch_ps.json"))
ISSUE20_OVERHEAD = (("torch", "overhead_issue20.json"), ("torch", "overhead_issue20_run2.json"),
                    ("tf", "overhead_tf_issue20.json"))


def issue20_revisions(*runs: dict) -> list[str]:
    """Issue 20's revisions table, a row per run; load and quiet recomputed."""
    out = []
    for (label, _), d in zip(ISSUE20_REVISIONS, runs, strict=True):
        q = quiet_label(d)
        n = d["rounds"] if isinstance(d["rounds"], int) else len(d["rounds"])
        out.append(f"| {label} | {n} | {d['ratio_median']:.3f} | {d['ratio_min']:.3f} | "
                   f"{d['ratio_max']:.3f} | {q['load_1min_max']:.2f} | "
                   f"{'yes' if q['quiet'] else 'no'} |")
    return out


def issue20_overhead(*runs: dict) -> list[str]:
    """Issue 20's overhead rows, a row per raw file."""
    out = []
    for (fw, raw), d in zip(ISSUE20_OVERHEAD, runs, strict=True):
        m = d["median_step_s"]
        out.append(f"| {fw}, `{raw}` | {_ms(m['minimal'])} | {_ms(m['hvdscale'])} | "
                   f"{d['overhead_pct']:+.1f} %")
    return out


def issue41_compile(d: dict) -> list[str]:
    """Issue 41's headline: the compiled loop's compile time over every launch of a raw file
    (bench_precision.py), recomputed from the launches."""
    took = sorted(x["compile_s"] for x in d["launches"] if x["impl"] == "compiled")
    if not took:
        raise FigureError("no compiled launch")
    return [f"compile time {statistics.median(took):.1f} s (median of {len(took)} launches, "
            f"{took[0]:.1f}-{took[-1]:.1f} s)"]


def issue21_backtest(d: dict) -> list[str]:
    """Issue 21's back-test table and summary: ``hvdscale backtest``'s own summary, recomputed
    from the JSON its ``--out`` wrote (the raw file), every line as the text shows it."""
    from hvdscale.study.predict.backtest import render_summary

    return [line for line in render_summary(d).splitlines() if line]


SECTION_CHECKS: list[tuple[str, tuple[str, ...], Callable[..., list[str]]]] = [
    ("issue 3 harness overhead", ISSUE3_RUNS, issue3_overhead),
    ("issue 3 scaling", ("strategies_np2.json",), issue3_strategies),
    ("issue 4 parameter server np=2", ("ps_comm_np2.json",), issue4_ps),
    ("issue 4 parameter server np=3", ("ps_comm_np3.json",), issue4_ps),
    ("issue 6 soak", ("soak.json",), issue6_soak),
    ("issue 10 frameworks", ("frameworks.json",), issue10_frameworks),
    ("issue 10 TF harness overhead", ("overhead_tf.json",), overhead_tf),
    ("issue 16 work split", ("bucketing_work_split.json",), issue16_work_split),
    ("issue 16 timed", ("bucketing.json",), issue16_timed),
    ("issue 14 seed NMT prediction", ("comm_model.json",), issue14_seed),
    ("issue 17 runs 1 and 2", ("overhead_issue17_run1.json", "overhead.json"), issue17_overhead),
    ("issue 12 demo goal", ("fusion_demo.json",), issue12_demo_goal),
    ("issue 12 comm-heavy fusion", ("fusion_commheavy_torch.json",), issue12_commheavy),
    ("issue 15 GEMM findings", ("gemm.md",), issue15_gemm),
    ("issue 20 revisions", tuple(r for _, r in ISSUE20_REVISIONS), issue20_revisions),
    ("issue 20 overhead", tuple(r for _, r in ISSUE20_OVERHEAD), issue20_overhead),
    ("issue 41 demo compile", ("precision_demo.json",), issue41_compile),
    ("issue 41 seed compile", ("precision_seed.json",), issue41_compile),
    ("issue 21 back-test", ("backtest.json",), issue21_backtest),
]
"""(section, raw files in the results directory, the figures they give as the text prints
them: the check is called with each raw file's contents, in this order)."""

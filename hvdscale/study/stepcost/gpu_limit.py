"""How close a single GPU's training step comes to what its GEMMs can do (issue 31), from the
raw results ``evidence/gpu_device.sh`` writes:

    python -m hvdscale.study.stepcost.gpu_limit OUT [GEMM]   (OUT/seeds holds the runs; the GEMM
        curves come from OUT/gemm, or from the folder GEMM where OUT has none: the last line
        names the folder and when its curves were measured)

Per seed-notes run (fused, loop or compiled; fp32, TF32, bf16 or fp16): words/s beside the
notes' figures, the step's useful TFLOP/s, and the fraction of the step's time its GEMMs would
need at their best.

The reference is the GEMMs the step really runs, part by part (``gemm_parts``), not one GEMM
of "the same shape": a layer's input projection runs over every time step of the batch at
once (N = batch x time), only the recurrent product runs once per time step (N = batch; its
weight gradient can again be one GEMM over all steps), and the output projection covers every
target token. Each product's best time is its flops at the fastest rate measured for it: the
GEMM curve's own point where the curve holds that shape (M, K, N; the faster of plain and
pre-transposed), else the fastest GEMM measured at that precision anywhere (the peak-size
GEMM, or a faster curve point): a shape the curve lacks is never charged a slower rate than
the GPU was seen to reach. The fraction is the sum of those best times over the measured step
time. Above 100 % the step beat its reference, which is then wrong (a kernel faster than any
measured GEMM, e.g. a persistent RNN kernel): the row says so instead of printing the ratio
as a result. The old reference (a per-time-step GEMM, M = 4 x hidden, N = the batch) read 131 %
on the H100 for exactly this reason.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hvdscale.records.fields import Record
from hvdscale.records.gemm import GemmRecord
from hvdscale.records.run import RunRecord
from hvdscale.records.store import RESULTS_FILE, read_records
from hvdscale.study.stepcost.step_flops import FWD_BWD, output_vocab

NOTES = {"fused": (55411, 51046), "loop": (43398, 39369)}
"""Seed 000 and 001 words/s on one GPU: cudnn_lstm (fused) and dynamic_rnn (loop); the notes
have no compiled loop."""
PARTS = ("input projections", "recurrent products", "output projection")
VARIANTS = ("NN", "TN", "NT")
"""Forward, data gradient, weight gradient (seed note 004's naming)."""


def _records(path: Path) -> list[Record]:
    """The records of ``path``'s results.jsonl (none without one), typed."""
    f = path / RESULTS_FILE
    return read_records(f) if f.exists() else []


def _gemm(part: str, m: int, k: int, n: int, count: float, variants: tuple[str, ...]
          ) -> list[dict[str, Any]]:
    """``count`` products of M x K by K x N per step for each of ``variants``."""
    return [{"part": part, "M": m, "K": k, "N": n, "count": count, "variant": v,
             "flops": 2.0 * m * k * n * count} for v in variants]


def _lstm(width: int, hidden: int, layers: int, dirs: int, batch: int, steps: float
          ) -> list[dict[str, Any]]:
    """One stacked LSTM's products per training step over ``steps`` time steps."""
    out: list[dict[str, Any]] = []
    for _ in range(layers):
        for _ in range(dirs):
            out += _gemm(PARTS[0], 4 * hidden, width, round(batch * steps), 1, VARIANTS)
            # forward and data gradient: one product per time step (each needs the last);
            # the weight gradient sums over steps: one product over all of them
            out += _gemm(PARTS[1], 4 * hidden, hidden, batch, steps, VARIANTS[:2])
            out += _gemm(PARTS[1], 4 * hidden, hidden, round(batch * steps), 1, VARIANTS[2:])
        width = dirs * hidden
    return out


def gemm_parts(record: RunRecord) -> list[dict[str, Any]]:
    """The matrix products of one training step of a run record, with their shapes: per
    sentence, the source and target tokens the record measured (real tokens, as the useful
    flops count them)."""
    model, batch = record.model_config, record.config.data.batch_size
    sentences = max(1, record.sentences)
    h, e, v = model.hidden_size, model.embed_dim, output_vocab(model, record.vocab)
    tgt = record.loss_tokens / sentences
    if model.kind == "lm":
        parts = _lstm(e, h, model.encoder_layers, 1, batch, tgt)
    else:
        dirs = 2 if model.bidirectional else 1
        src = (record.words - record.loss_tokens) / sentences
        parts = (_lstm(e, h // dirs, model.encoder_layers, dirs, batch, src)
                 + _lstm(e, h, model.decoder_layers, 1, batch, tgt))
        if model.attention:
            parts += _gemm(PARTS[2], h, 2 * h, round(batch * tgt), 1, VARIANTS)
    parts += _gemm(PARTS[2], v, h, round(batch * tgt), 1, VARIANTS)
    assert len(VARIANTS) == FWD_BWD  # one product per variant: the count step_flops uses
    return parts


def _precision(gemm: GemmRecord, precision: str) -> dict[str, Any] | None:
    return next((f for f in gemm.frameworks if f.get("precision", "fp32") == precision), None)


def reference_rate(gemm: GemmRecord | None, part: dict[str, Any],
                   precision: str) -> tuple[float | None, str]:
    """The fastest rate (FLOP/s) measured for ``part``'s product and where it comes from."""
    res = _precision(gemm, precision) if gemm else None
    if res is None:
        return None, f"no {precision} GEMM curve"
    rate = lambda r: max(r["gflops"], r.get("twin_gflops") or 0.0)  # noqa: E731
    same = [r for r in res["rows"] if (r["M"], r["K"], r["N"], r["variant"])
            == (part["M"], part["K"], part["N"], part["variant"])]
    if same:
        return 1e9 * max(rate(r) for r in same), "curve"
    best = max([rate(r) for r in res["rows"]] + [(res.get("peak") or {}).get("gflops", 0.0)])
    return 1e9 * best, "fastest measured"


def step_reference(record: RunRecord, gemm: GemmRecord | None,
                   precision: str) -> dict[str, Any]:
    """Per part: flops per step and the best time of its products (None where no curve)."""
    by: dict[str, dict[str, Any]] = {p: {"flops": 0.0, "best_s": 0.0, "sources": set()}
                                     for p in PARTS}
    for g in gemm_parts(record):
        rate, src = reference_rate(gemm, g, precision)
        d = by[g["part"]]
        d["flops"] += g["flops"]
        d["sources"].add(src)
        unknown = rate is None or d["best_s"] is None
        d["best_s"] = None if unknown else d["best_s"] + g["flops"] / rate
    return {p: {**d, "sources": sorted(d["sources"])} for p, d in by.items()}


def run_precision(record: RunRecord) -> str:
    """The GEMM precision a run's products ran at: its ``precision`` (fp32 with TF32 on is
    tf32; records older than issue 41 carry no precision and ran fp32)."""
    precision = record.configured_precision
    return "tf32" if precision == "fp32" and record.config.tf32 == "on" else precision


def limit_rows(runs: list[RunRecord], gemm: GemmRecord | None) -> list[dict[str, Any]]:
    """One row per run: impl, TF32, words/s, step time, useful TFLOP/s (the step's products'
    flops over its time), each part's best time, their sum, and the fraction (sum over the
    step time; ``wrong_reference`` when above 1)."""
    rows = []
    for r in runs:
        m, tf32 = r.model_config, r.config.tf32
        precision = run_precision(r)
        step_s = r.words / max(1, r.sentences) * r.config.data.batch_size / r.words_per_s
        parts = step_reference(r, gemm, precision)
        flops = sum(p["flops"] for p in parts.values())
        times = [p["best_s"] for p in parts.values()]
        best = None if any(t is None for t in times) else sum(times)
        frac = best / step_s if best is not None else None
        rows.append({"impl": m.rnn_impl, "tf32": tf32, "precision": precision,
                     "words_per_s": r.words_per_s, "step_s": step_s,
                     "gpu": (r.device.gpu or {}).get("model"),
                     "useful_tflops": flops / step_s / 1e12, "parts": parts, "best_s": best,
                     "fraction": frac, "wrong_reference": frac is not None and frac > 1.0})
    return rows


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{1e3 * x:.1f}"


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table, beside the seed notes' words/s."""
    out = ["|GPU|impl|precision|words/s|notes 000 / 001|step (ms)|useful TFLOP/s|best time (ms): "
           "input proj. / recurrent / output proj.|sum (ms)|fraction|",
           "|:--|:--|:--|--:|--:|--:|--:|--:|--:|--:|"]
    for x in rows:
        f = "-" if x["fraction"] is None else f"{100 * x['fraction']:.0f}%"
        if x["wrong_reference"]:
            f += " WRONG REFERENCE: the step beat its GEMMs' best times"
        n = NOTES.get(x["impl"])
        parts = " / ".join(_ms(x["parts"][p]["best_s"]) for p in PARTS)
        notes = "-" if n is None else f"{n[0]:,} / {n[1]:,}"
        out.append(f"|{x['gpu']}|{x['impl']}|{x['precision']}|{x['words_per_s']:,.0f}|"
                   f"{notes}|{_ms(x['step_s'])}|{x['useful_tflops']:.2f}|{parts}|"
                   f"{_ms(x['best_s'])}|{f}|")
    srcs = sorted({s for x in rows for p in x["parts"].values() for s in p["sources"]})
    out.append(f"\nBest time of a product: its flops at the GEMM curve's rate for its shape "
               f"where measured, else at the fastest GEMM measured at its precision (sources "
               f"used: {', '.join(srcs) or '-'}); fraction = sum of the best times / step time.")
    return "\n".join(out) + "\n"


def _gemm_record(folder: Path) -> GemmRecord | None:
    gemms = [r for r in _records(folder) if isinstance(r, GemmRecord) and r.status == "ok"]
    return gemms[-1] if gemms else None


def main(argv: list[str]) -> int:
    """Print the table for the results folder ``argv[0]`` (GEMM curves from ``argv[1]`` where
    the folder has none of its own)."""
    if len(argv) not in (1, 2) or not all(Path(a).is_dir() for a in argv):
        print("usage: python -m hvdscale.study.stepcost.gpu_limit OUT [GEMM] "
              "(an evidence/gpu_device.sh folder; GEMM: a folder of `hvdscale gemm` records)",
              file=sys.stderr)
        return 2
    out = Path(argv[0])
    gemm, source = _gemm_record(out / "gemm"), out / "gemm"
    if gemm is None and len(argv) == 2:
        gemm, source = _gemm_record(Path(argv[1])), Path(argv[1])
    runs = [r for r in _records(out / "seeds") if isinstance(r, RunRecord)]
    print(markdown(limit_rows(runs, gemm)))
    print(f"GEMM curves: {source if gemm else 'none (no GEMM records)'}"
          + (f", measured {gemm.finished}" if gemm else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

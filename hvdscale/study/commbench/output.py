"""commbench's outputs: the Markdown table, the PNG, writing DIR/commbench.{json,md,png}, and
reading a result back (checked, and fitted again) for ``predict``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from hvdscale.errors import HvdscaleError
from hvdscale.records.commbench import CommbenchRecord
from hvdscale.study.commbench.model import refit
from hvdscale.study.commbench.sizes import human
from hvdscale.study.plotting import figure


def table(result: dict[str, Any]) -> str:
    """Markdown: busbw per size and transport, the fits and where one line stops fitting."""
    names = list(result["transports"])
    lines = [f"# commbench: {result['ranks']} ranks\n",
             f"Memory copy (same run): {result['memcpy']['alone_GBps']:.2f} GB/s one rank alone, "
             f"{result['memcpy']['concurrent_GBps']:.2f} GB/s per rank with all copying.\n",
             "Time: median over repeats of the slowest rank's time (µs); busbw in GB/s.\n",
             "|Size|" + "|".join(f"{t} time (µs)|{t} busbw" for t in names) + "|",
             "|:--|" + ":--|" * (2 * len(names))]
    for i, size in enumerate(result["sizes"]):
        row = [human(size)]
        for t in names:
            p = result["transports"][t]["points"][i]
            row += [f"{p['time_s'] * 1e6:.1f}", f"{p['busbw_GBps']:.3f}"]
        lines.append("|" + "|".join(row) + "|")
    lines += ["", "## Fits: time = a + b x bytes (weighted by 1/time), per-link alpha and beta",
              "", "|Transport|a (µs)|1/b (GB/s)|link alpha (µs)|link bandwidth (GB/s)|"
              "rms rel. residual|sizes off the line (>25%)|two lines fit better above|", "|:--|"
              + ":--|" * 7]
    for t in names:
        tr = result["transports"][t]
        f, ln = tr["fit"], tr["link"]
        if f.get("b_s_per_byte") is None:
            continue
        brk = f["break"]
        lines.append(
            f"|{t}|{f['a_s'] * 1e6:.1f} ± {f['a_se_s'] * 1e6:.1f}|"
            f"{_gbps(f['b_s_per_byte'])}|"
            f"{_fmt_us(ln.get('alpha_s'))}|{_gbps(ln.get('beta_s_per_byte'))}|"
            f"{f['rms_rel_residual']:.2f}|{', '.join(human(s) for s in f['off_line']) or 'none'}|"
            f"{human(brk['below_bytes']) + ' → ' + human(brk['above_bytes']) if brk else 'no'}|")
    lines.append("")
    for t in names:
        lines.append(f"- {t}: {result['transports'][t]['definition']}")
    return "\n".join(lines) + "\n"


def _gbps(b: float | None) -> str:
    return "" if not b or b <= 0 else f"{1e-9 / b:.2f}"


def _fmt_us(s: float | None) -> str:
    return "" if s is None else f"{s * 1e6:.2f}"


def plot(result: dict[str, Any], path: Path) -> Path:
    """PNG: time vs size with each fit (left), busbw vs size with the memcpy line (right)."""
    with figure(path, 1, 2, figsize=(11, 4.2)) as (fig, (ax1, ax2)):
        for t, tr in result["transports"].items():
            x = np.array([p["bytes"] for p in tr["points"]], float)
            line, = ax1.loglog(x, [p["time_s"] for p in tr["points"]], "o", ms=3, label=t)
            f = tr["fit"]
            if f.get("b_s_per_byte") is not None:
                ax1.loglog(x, np.maximum(f["a_s"] + f["b_s_per_byte"] * x, 1e-9), "-", lw=1,
                           color=line.get_color(), alpha=0.6)
            ax2.semilogx(x, [p["busbw_GBps"] for p in tr["points"]], "o-", ms=3, label=t,
                         color=line.get_color())
        ax2.axhline(result["memcpy"]["concurrent_GBps"], color="grey", ls=":",
                    label="memcpy, all ranks")
        ax2.axhline(result["memcpy"]["alone_GBps"], color="black", ls=":",
                    label="memcpy, one rank")
        ax1.set(xlabel="message size (bytes)", ylabel="time (s)",
                title="Time (lines: a + b x bytes)")
        ax2.set(xlabel="message size (bytes)", ylabel="bus bandwidth (GB/s)", title="busbw")
        for ax in (ax1, ax2):
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"hvdscale commbench, {result['ranks']} ranks", fontsize=10)
    return path


def write_outputs(result: dict[str, Any], out: Path, with_plot: bool = True) -> None:
    """DIR/commbench.json, commbench.md and (with_plot) commbench.png."""
    checked = CommbenchRecord.from_dict(result, where="the commbench record being written")
    (out / "commbench.json").write_text(json.dumps(checked.to_dict(), indent=1))
    (out / "commbench.md").write_text(table(result))
    if with_plot:
        plot(result, out / "commbench.png")


def load_commbench(path: str | Path) -> dict[str, Any]:
    """A commbench result from DIR or DIR/commbench.json, checked enough to predict from.

    Raises:
        HvdscaleError: missing, not JSON, or without a transport's fit.
    """
    p = Path(path)
    f = p / "commbench.json" if p.is_dir() else p
    if not f.exists():
        raise HvdscaleError(f"no commbench result at {f} (run `hvdscale commbench --np N "
                            f"--out {p}` first)")
    try:
        data = json.loads(f.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise HvdscaleError(f"{f} is not a commbench result: not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("kind") != "commbench" or \
            not isinstance(data.get("transports"), dict) or not isinstance(data.get("ranks"), int):
        raise HvdscaleError(f"{f} is not a commbench result (no kind/ranks/transports)")
    try:
        for tr in data["transports"].values():
            pts = tr["points"]
            assert len(pts) >= 2 and all(p["bytes"] > 0 and p["time_s"] > 0 for p in pts)
        refit(data)
    except (AssertionError, KeyError, TypeError, ValueError, np.linalg.LinAlgError):
        raise HvdscaleError(f"{f}: a transport without at least two measured sizes (bytes, "
                            "time_s): a damaged or too small commbench result") from None
    for name, tr in data["transports"].items():
        link = tr["link"]
        if not all(isinstance(link.get(k), int | float) and math.isfinite(link[k])
                   for k in ("alpha_s", "beta_s_per_byte")):
            raise HvdscaleError(f"{f}: transport {name!r} has no link alpha/beta (measured at "
                                f"{data['ranks']} rank(s)?)")
    return data

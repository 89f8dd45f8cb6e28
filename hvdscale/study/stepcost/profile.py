"""``hvdscale profile``: what one training step executes, fused vs loop (vs compiled) RNN.

For a config, the model is built twice through the framework's adapter (``rnn_impl`` fused and
loop), in this one process, and a few training steps (forward, backward, optimizer step) are
profiled after two warm-up steps. Per step it counts:

* PyTorch (eager, no graph): ``ops``, the operators the program called (outermost ``aten::``
  events of the profiler, forward and backward) and ``kernels``, the innermost operator events
  (operators that call no other operator: what actually ran). These stand in for the seed
  notes' "operators in the graph" and "kernel invocations", which were measured on TensorFlow.
* TensorFlow: ``graph_ops``, the operations of the traced train step's graph, with the ops inside
  while-loop bodies counted separately, and ``kernels``, the kernels the runtime executed per
  step (from the profiler's trace).

It also splits a step's time between the RNN, the softmax projection (projection and loss) and
the rest, and puts the ratio loop/fused beside the notes' figures (212 vs 1,522 graph ops, ratio
7.1; 1,281 vs 37,644 kernels per step, ratio 29.4, on one GPU). Times come from the profiled
steps (profiler overhead included, more of it for the loop's many small operators); the
unprofiled step time is recorded beside them.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import socket
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hvdscale.config import RunConfig, load_config, tf32_in_force, to_dict
from hvdscale.errors import HvdscaleError
from hvdscale.frameworks.profiling import PHASES, ProfileSteps
from hvdscale.records.profile import ProfileRecord
from hvdscale.records.study import LoadPair
from hvdscale.registry import check_framework

IMPLS = ("fused", "loop")
"""What every profile compares (a custom model must declare both)."""


def impls_of(framework: str) -> tuple[str, ...]:
    """The implementations profiled: ``IMPLS``, and PyTorch's compiled loop."""
    return (*IMPLS, "compiled") if framework == "torch" else IMPLS
NOTES = {"graph_ops": {"fused": 212, "loop": 1522, "ratio": 7.1},
         "kernels": {"fused": 1281, "loop": 37644, "ratio": 29.39}}
"""The seed notes' figures (TensorFlow, cudnn_lstm vs dynamic_rnn, one GPU)."""


def _batches(cfg: RunConfig) -> tuple[Any, int, int]:
    """An endless stream of this config's batches (as one rank of one) and the vocab sizes."""
    from hvdscale.core.batching import make_plan
    from hvdscale.corpora.corpus import load_corpus
    from hvdscale.train.rank_data import vocab_sizes

    corpus = load_corpus(cfg.data, cfg.model.data_kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         0, 1)
    src_vocab, tgt_vocab = vocab_sizes(cfg, corpus)
    plan = make_plan(corpus, cfg.data, cfg.model.data_kind, 0, 1)
    return plan.batches(), src_vocab, tgt_vocab


def train_step(adapter: Any) -> Callable[[Any], float]:
    """One training step through the adapter protocol: zero, forward and backward, update."""
    def step(batch: Any) -> float:
        adapter.zero_grad()
        loss = adapter.forward_backward(batch, 1.0)
        adapter.step()
        return loss

    return step


# --- the framework's profiler -------------------------------------------------------------------

def load_profiler(framework: str) -> ProfileSteps:
    """``profile_steps`` of ``hvdscale.frameworks.<framework>.profile``; importing it imports the
    framework, so the thread environment is set first.

    Raises:
        HvdscaleError: the framework has no profiler module.
    """
    name = f"hvdscale.frameworks.{check_framework(framework)}.profile"
    try:
        return importlib.import_module(name).profile_steps
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        raise HvdscaleError(f"hvdscale profile does not support framework={framework} yet") \
            from None


def profile_impl(cfg: RunConfig, steps: int, threads: tuple[int, int],
                 profile_steps: ProfileSteps) -> dict[str, Any]:
    """Build ``cfg``'s model through its framework's adapter, warm up (two steps), time
    ``steps`` unprofiled steps, then hand ``steps`` more to the framework's profiler."""
    from hvdscale.core.device import resolve_device
    from hvdscale.frameworks import load_framework

    fw = load_framework(cfg.framework)
    fw.set_threads(*threads)
    placement = resolve_device(cfg.device, fw.gpu_count(), 0, 1)  # device=cuda: a GPU or error
    fw.use_device(placement)
    fw.set_tf32(tf32_in_force(cfg))
    batches, src_vocab, tgt_vocab = _batches(cfg)
    adapter = fw.make_adapter(cfg.model, cfg.optim, src_vocab, tgt_vocab, placement,
                              precision=cfg.precision)
    # A compiled loop compiles first, timed apart (its record's ``compile``), never in a step.
    compiled = getattr(adapter, "precompile", lambda b: None)(next(batches))
    step = train_step(adapter)
    for _ in range(2):  # warm-up: tracing (TF), allocations, library dispatch
        step(next(batches))
    plain = []
    for _ in range(steps):
        b = next(batches)
        t0 = time.perf_counter()
        step(b)
        plain.append(time.perf_counter() - t0)
    todo = [next(batches) for _ in range(steps)]
    return {**profile_steps(adapter, step, todo, statistics.median(plain)), "compile": compiled}


# --- the command -------------------------------------------------------------------------------

def _time_split(res: dict[str, Any]) -> dict[str, float]:
    """Fractions of the profiled step: RNN, softmax projection, the rest (other operators and
    everything between operators)."""
    wall = res["profiled_step_s"]
    rnn, soft = res["op_s_by_part"]["rnn"], res["op_s_by_part"]["softmax"]
    return {"rnn": rnn / wall, "softmax": soft / wall, "rest": max(0.0, 1 - (rnn + soft) / wall)}


def run_profile(config: str, overrides: list[str] | None = None, steps: int = 2,
                say: Callable[[str], None] | None = None) -> ProfileRecord:
    """Profile the fused and the loop RNN of ``config``; returns the profile record.

    Raises:
        HvdscaleError: a bad config, steps < 1, or a framework without a profiler here.
    """
    if not isinstance(steps, int) or steps < 1:
        raise HvdscaleError(f"--steps must be an integer >= 1 (got {steps!r})")
    cfg = load_config(config, overrides or [])
    impls_run = _impls_to_run(cfg)
    from hvdscale.core.threads import resolve_threads, thread_env
    from hvdscale.records.provenance import git_revision, versions

    threads = resolve_threads(cfg.threads.intra_op, cfg.threads.inter_op, 1)
    for k, v in thread_env(threads[0], "off", 1).items():
        os.environ.setdefault(k, v)
    profile_steps = load_profiler(cfg.framework)  # after the thread environment: imports it
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    impls: dict[str, Any] = {}
    for impl in impls_run:
        c = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, rnn_impl=impl))
        if say:
            say(f"hvdscale profile: {cfg.framework} {impl}, {steps} step(s) after 2 warm-up")
        res = profile_impl(c, steps, threads, profile_steps)
        res["time_split"] = _time_split(res)
        impls[impl] = res
    ratio, compiled = _ratios_over_fused(impls)
    return ProfileRecord(
        status="ok", started=started, finished=datetime.now(UTC).isoformat(timespec="seconds"),
        host=socket.gethostname(), name=cfg.name, framework=cfg.framework, config=to_dict(cfg),
        steps=steps, threads={"intra_op": threads[0], "inter_op": threads[1]},
        loadavg=LoadPair(before=list(load_before), after=list(os.getloadavg())),
        versions=versions(), git=git_revision(), impls=impls, ratio_loop_fused=ratio,
        ratio_compiled_fused=compiled, notes=NOTES, gpu=_gpu(cfg))


def _impls_to_run(cfg: RunConfig) -> tuple[str, ...]:
    """The implementations profiled: the framework's, or those of them a custom model's builder
    declares, which must include fused and loop (the comparison needs both).

    Raises:
        HvdscaleError: a custom model without both fused and loop.
    """
    if cfg.model.kind != "custom":
        return impls_of(cfg.framework)
    from hvdscale.models.custom import builder_module

    declared = tuple(getattr(builder_module(cfg.model), "RNN_IMPLS", ("fused",)))
    impls_run = tuple(i for i in impls_of(cfg.framework) if i in declared)
    if not set(IMPLS) <= set(declared):
        raise HvdscaleError(f"hvdscale profile compares rnn_impl fused and loop; "
                            f"model.builder {cfg.model.builder!r} declares "
                            f"RNN_IMPLS={declared!r}")
    return impls_run


def _ratios_over_fused(impls: dict[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
    """The loop's and the compiled loop's op and kernel counts over the fused RNN's (the
    compiled ratios empty where it was not profiled)."""
    counts = ("graph_ops", "ops", "kernels", "gpu_kernels")
    ratio = {k: impls["loop"][k] / impls["fused"][k] for k in counts
             if k in impls["fused"] and impls["fused"][k]}
    compiled = {k: impls["compiled"][k] / impls["fused"][k] for k in counts
                if "compiled" in impls and k in impls["fused"] and impls["fused"][k]}
    return ratio, compiled


def markdown(rec: ProfileRecord) -> str:
    """The notes' operator and kernel tables for this machine and config, and the time split."""
    f, lp = rec.impls["fused"], rec.impls["loop"]
    r = rec.ratio_loop_fused
    m = rec.config["model"]
    d = rec.config["data"]
    ops_key = "graph_ops" if "graph_ops" in f else "ops"
    ops_what = ("graph ops of the traced train step" if ops_key == "graph_ops"
                else "operators executed per step")
    gpu = (rec.gpu or {}).get("model")
    where = f"GPU ({gpu})" if gpu else "CPU (this machine)"
    gpu_row = [f"|{where}, GPU kernels|{f['gpu_kernels']:,.0f}|{lp['gpu_kernels']:,.0f}|"
               f"{r.get('gpu_kernels', 0):.1f}|1,281|37,644|29.4|"] if "gpu_kernels" in f else []
    lines = [f"## Fused vs loop RNN: {rec.name} ({rec.framework}, {m['kind']}, "
             f"{m['encoder_layers']}+{m['decoder_layers']} layers, hidden {m['hidden_size']}, "
             f"batch {d['batch_size']}; {rec.threads['intra_op']} thread(s), "
             f"loadavg {rec.loadavg.before[0]:.2f})", "",
             f"Number of operators ({ops_what}):", "",
             "|device|fused|loop|ratio loop/fused|notes: cudnn_lstm|notes: dynamic_rnn|"
             "notes: ratio|", "|:--|--:|--:|--:|--:|--:|--:|",
             f"|{where}|{f[ops_key]:,.0f}|{lp[ops_key]:,.0f}|{r.get(ops_key, 0):.1f}|"
             f"212|1,522|7.1|", "",
             "Kernel invocations per training step:", "",
             "|device|fused|loop|ratio loop/fused|notes: cudnn_lstm|notes: dynamic_rnn|"
             "notes: ratio|", "|:--|--:|--:|--:|--:|--:|--:|",
             f"|{where}, aten (innermost operators)|{f['kernels']:,.0f}|{lp['kernels']:,.0f}|"
             f"{r.get('kernels', 0):.1f}|1,281|37,644|29.4|", *gpu_row, "",
             *_phase_table(rec),
             "Where a step's time goes (profiled steps):", "",
             "|impl|step (s, unprofiled)|step (s, profiled)|RNN|softmax projection|rest|",
             "|:--|--:|--:|--:|--:|--:|"]
    for impl in rec.impls:
        x = rec.impls[impl]
        s = x["time_split"]
        lines.append(f"|{impl}|{x['step_s']:.3f}|{x['profiled_step_s']:.3f}|"
                     f"{100 * s['rnn']:.0f}%|{100 * s['softmax']:.0f}%|{100 * s['rest']:.0f}%|")
    lines.append("")
    return "\n".join([*lines, *_compiled_lines(rec, ops_key)])


def _compiled_lines(rec: dict[str, Any], ops_key: str) -> list[str]:
    """The compiled loop's counts beside fused (PyTorch; records from before it have none)."""
    c = rec.impls.get("compiled")
    if c is None:
        return []
    r = rec.ratio_compiled_fused or {}
    took = (c.get("compile") or {}).get("compile_s")
    return ["Compiled loop (torch.compile of the cell; compile time measured apart"
            + (f": {took:.1f} s" if took is not None else "") + "):", "",
            "|counted per step|compiled|ratio compiled/fused|", "|:--|--:|--:|",
            f"|operators|{c[ops_key]:,.0f}|{r.get(ops_key, 0):.1f}|",
            f"|kernels|{c['kernels']:,.0f}|{r.get('kernels', 0):.1f}|",
            *([f"|GPU kernels|{c['gpu_kernels']:,.0f}|{r.get('gpu_kernels', 0):.1f}|"]
              if "gpu_kernels" in c else []), ""]


def _phase_table(rec: dict[str, Any]) -> list[str]:
    """Operators and kernels per step by phase (forward, backward, update), where counted."""
    if "ops_by_phase" not in rec.impls["fused"]:
        return []
    lines = ["Per phase (operators / kernels per step):", "",
             "|impl|forward|backward|update|", "|:--|--:|--:|--:|"]
    for impl in rec.impls:
        x = rec.impls[impl]
        cells = [f"{x['ops_by_phase'][p]:,.0f} / {x['kernels_by_phase'][p]:,.0f}"
                 for p in PHASES]
        lines.append(f"|{impl}|" + "|".join(cells) + "|")
    return [*lines, ""]


def _gpu(cfg: RunConfig) -> dict[str, Any] | None:
    """The GPU the profile ran on (model, driver, CUDA, cuDNN, NCCL, TF32), None on the CPU."""
    from hvdscale.core.device import resolve_device
    from hvdscale.frameworks import load_framework

    fw = load_framework(cfg.framework)
    return fw.gpu_provenance(resolve_device(cfg.device, fw.gpu_count(), 0, 1))

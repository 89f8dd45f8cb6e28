"""``hvdscale profile``: what one training step executes, fused vs loop RNN.

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
import os
import socket
import statistics
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hvdscale.config import RunConfig, load_config, to_dict
from hvdscale.errors import HvdscaleError

IMPLS = ("fused", "loop")
NOTES = {"graph_ops": {"fused": 212, "loop": 1522, "ratio": 7.1},
         "kernels": {"fused": 1281, "loop": 37644, "ratio": 29.39}}
"""The seed notes' figures (TensorFlow, cudnn_lstm vs dynamic_rnn, one GPU)."""
CATEGORIES = ("rnn", "softmax", "other")
PHASES = ("forward", "backward", "update")
# Loss ops called outside the projection module: part of the softmax projection's cost.
_SOFTMAX_OPS = ("aten::cross_entropy_loss", "aten::log_softmax", "aten::_log_softmax",
                "aten::nll_loss", "aten::nll_loss_nd", "aten::nll_loss2d")


def _batches(cfg: RunConfig) -> tuple[Any, int, int]:
    """An endless stream of this config's batches (as one rank of one) and the vocab sizes."""
    from hvdscale.core.data import load_corpus, make_plan
    from hvdscale.train.runner import _vocab_sizes

    corpus = load_corpus(cfg.data, cfg.model.kind, cfg.model.src_vocab, cfg.model.tgt_vocab,
                         0, 1)
    src_vocab, tgt_vocab = _vocab_sizes(cfg, corpus)
    plan = make_plan(corpus, cfg.data, cfg.model.kind, 0, 1)
    return plan.batches(), src_vocab, tgt_vocab


def train_step(adapter: Any) -> Callable[[Any], float]:
    """One training step through the adapter protocol: zero, forward and backward, update."""
    def step(batch: Any) -> float:
        adapter.zero_grad()
        loss = adapter.forward_backward(batch, 1.0)
        adapter.step()
        return loss

    return step


# --- PyTorch -------------------------------------------------------------------------------------

def _label_modules(model: Any) -> list[Any]:
    """Wrap the RNN stacks and the softmax projection in profiler ranges (forward pass)."""
    import torch
    from torch import nn

    from hvdscale.models.torch.lstm import LoopLSTM

    handles = []
    for name, mod in model.named_children():
        if isinstance(mod, nn.RNNBase | LoopLSTM):
            label = "hvdscale/rnn"
        elif name == "proj":
            label = "hvdscale/softmax"
        else:
            continue
        ranges: list[Any] = []

        def pre(_m: Any, _in: Any, label: str = label, ranges: list = ranges) -> None:
            r = torch.autograd.profiler.record_function(label)
            r.__enter__()
            ranges.append(r)

        def post(_m: Any, _in: Any, _out: Any, ranges: list = ranges) -> None:
            ranges.pop().__exit__(None, None, None)

        handles += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    return handles


def _is_op(ev: Any) -> bool:
    # Operators carry a namespace (aten::mm); profiler ranges (ours, the optimizer's) and the
    # autograd engine's wrappers (autograd::engine::evaluate_function: ...) do not count.
    return "::" in ev.name and not ev.name.startswith("autograd::")


def _ancestors(ev: Any) -> list[Any]:
    out = []
    p = ev.cpu_parent
    while p is not None:
        out.append(p)
        p = p.cpu_parent
    return out


def _descendants(ev: Any) -> list[Any]:
    out, todo = [], list(ev.cpu_children)
    while todo:
        e = todo.pop()
        out.append(e)
        todo.extend(e.cpu_children)
    return out


def count_torch_events(events: list[Any], steps: int) -> dict[str, Any]:
    """Ops, kernels and the time split per step from a torch profiler's event list.

    Forward operators are attributed by the profiler range around them; a backward operator by
    the autograd node it runs for, whose sequence number is the one of the forward operator that
    recorded it.
    """
    seq_cat: dict[int, str] = {}
    outer = [e for e in events if _is_op(e) and not any(_is_op(a) for a in _ancestors(e))]
    for e in events:
        if e.name in ("hvdscale/rnn", "hvdscale/softmax"):
            cat = e.name.split("/")[1]
            for d in _descendants(e):
                if d.sequence_nr >= 0:
                    seq_cat[d.sequence_nr] = cat
        elif e.name in _SOFTMAX_OPS and not any(_is_op(a) for a in _ancestors(e)):
            for d in [e, *_descendants(e)]:
                if d.sequence_nr >= 0:
                    seq_cat[d.sequence_nr] = "softmax"

    def category(e: Any) -> str:
        for a in _ancestors(e):
            if a.name.startswith("hvdscale/"):
                return a.name.split("/")[1]
            if a.name.startswith("autograd::engine::evaluate_function"):
                return seq_cat.get(a.sequence_nr, "other")
        return "softmax" if e.name in _SOFTMAX_OPS else "other"

    def phase(e: Any) -> str:
        for a in _ancestors(e):
            if a.name.startswith("autograd::engine::evaluate_function"):
                return "backward"
            if a.name.startswith("Optimizer."):
                return "update"
        return "forward"

    ops: Counter[str] = Counter()
    op_us: Counter[str] = Counter()
    for e in outer:
        c = category(e)
        ops[c] += 1
        op_us[c] += e.time_range.elapsed_us()
    kernels = [e for e in events if _is_op(e) and not any(_is_op(c) for c in e.cpu_children)]
    kcat: Counter[str] = Counter(category(e) for e in kernels)
    ophase: Counter[str] = Counter(phase(e) for e in outer)
    kphase: Counter[str] = Counter(phase(e) for e in kernels)
    return {
        "ops": len(outer) / steps, "kernels": len(kernels) / steps,
        "events": len(events) / steps,
        "ops_by_part": {c: ops[c] / steps for c in CATEGORIES},
        "kernels_by_part": {c: kcat[c] / steps for c in CATEGORIES},
        "ops_by_phase": {p: ophase[p] / steps for p in PHASES},
        "kernels_by_phase": {p: kphase[p] / steps for p in PHASES},
        "op_s_by_part": {c: op_us[c] / 1e6 / steps for c in CATEGORIES},
        "top_ops": Counter(e.name for e in outer).most_common(8),
    }


def profile_torch(cfg: RunConfig, steps: int, threads: tuple[int, int]) -> dict[str, Any]:
    """Profile ``steps`` training steps of ``cfg`` with PyTorch's profiler (after a warm-up)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from hvdscale.frameworks import load_framework

    fw = load_framework(cfg.framework)
    fw.set_threads(*threads)
    batches, src_vocab, tgt_vocab = _batches(cfg)
    adapter = fw.make_adapter(cfg.model, cfg.optim, src_vocab, tgt_vocab)
    step = train_step(adapter)
    for _ in range(2):  # warm-up: allocations, library dispatch
        step(next(batches))
    plain = []
    for _ in range(steps):
        b = next(batches)
        t0 = time.perf_counter()
        step(b)
        plain.append(time.perf_counter() - t0)
    handles = _label_modules(adapter.model)  # type: ignore[attr-defined]
    try:
        todo = [next(batches) for _ in range(steps)]
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            for b in todo:
                step(b)
            wall = time.perf_counter() - t0
    finally:
        for h in handles:
            h.remove()
    out = count_torch_events(list(prof.events()), steps)
    out.update(step_s=statistics.median(plain), profiled_step_s=wall / steps,
               counted_as={"ops": "outermost aten operators per step (forward + backward + "
                           "update)", "kernels": "innermost aten operators per step"},
               torch_threads=torch.get_num_threads())
    return out


# --- TensorFlow ---------------------------------------------------------------------------------

_WHILE_OPS = ("While", "StatelessWhile")
# The TF adapter's traced functions that make up one training step, in the order train_step
# calls them (zero_grad, forward_backward, step).
TF_STEP_FUNCTIONS = ("_zero", "_fb", "_apply")


def _called_functions(attrs: Any) -> list[str]:
    """Names of the functions an op's attributes refer to (while bodies, conds, calls)."""
    out = []
    for a in attrs.values():
        if a.HasField("func"):
            out.append(a.func.name)
        if a.HasField("list"):
            out += [f.name for f in a.list.func]
    return out


def count_graph_ops(graph: Any) -> dict[str, Any]:
    """Operations of a traced function's graph: its top level, plus every function its ops
    reach (while-loop bodies and conditions, nested calls), each reached function counted once.

    Returns:
        ``top``, ``in_loops`` (ops inside functions reached through a while op, at any depth),
        ``in_functions`` (other nested functions), ``total`` and ``functions``
        ({name: [reached through, ops]}).
    """
    lib = {fd.signature.name: fd for fd in graph.as_graph_def().library.function}
    todo: list[tuple[str, str, bool]] = []
    for op in graph.get_operations():
        todo += [(n, op.type, op.type in _WHILE_OPS) for n in _called_functions(op.node_def.attr)]
    seen: dict[str, list[Any]] = {}
    in_loops = in_functions = 0
    while todo:
        name, via, loop = todo.pop()
        if name in seen or name not in lib:
            continue
        n = len(lib[name].node_def)
        seen[name] = [via, n]
        if loop:
            in_loops += n
        else:
            in_functions += n
        for nd in lib[name].node_def:
            todo += [(m, nd.op, loop or nd.op in _WHILE_OPS) for m in _called_functions(nd.attr)]
    top = len(graph.get_operations())
    return {"top": top, "in_loops": in_loops, "in_functions": in_functions,
            "total": top + in_loops + in_functions, "functions": seen}


def _tf_part(op_name: str) -> str:
    """RNN, softmax projection or other, from a kernel's op name (name scopes, as the TF
    models name their layers)."""
    low = op_name.lower()
    if any(k in low for k in ("proj", "softmax", "cross_entropy")):
        return "softmax"
    if any(k in low for k in ("lstm", "encoder", "decoder", "rnn", "while")):
        return "rnn"
    return "other"


def count_tf_kernels(logdir: str, steps: int) -> dict[str, Any]:
    """Kernels executed per step, from the profiler trace (XSpace) written under ``logdir``.

    Every executed kernel is a host event named ``op_name:OpType``; executor bookkeeping
    (``ExecutorState::Process``), thread-pool and Python events are not kernels.
    """
    import glob

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    if not files:
        raise HvdscaleError(f"the TensorFlow profiler wrote no trace under {logdir}")
    kernels: Counter[str] = Counter()
    ps: Counter[str] = Counter()
    types: Counter[str] = Counter()
    for f in files:
        space = xplane_pb2.XSpace()
        with open(f, "rb") as fh:
            space.ParseFromString(fh.read())
        for plane in space.planes:
            meta = plane.event_metadata
            for line in plane.lines:
                for ev in line.events:
                    name = meta[ev.metadata_id].name
                    op, sep, typ = name.rpartition(":")
                    if not sep or not op or " " in name or "::" in name \
                            or not typ.isidentifier():
                        continue
                    part = _tf_part(op)
                    kernels[part] += 1
                    ps[part] += ev.duration_ps
                    types[typ] += 1
    total = sum(kernels.values())
    return {"kernels": total / steps,
            "kernels_by_part": {c: kernels[c] / steps for c in CATEGORIES},
            "op_s_by_part": {c: ps[c] / 1e12 / steps for c in CATEGORIES},
            "top_kernels": [[t, n / steps] for t, n in types.most_common(8)]}


def profile_tf(cfg: RunConfig, steps: int, threads: tuple[int, int]) -> dict[str, Any]:
    """Graph ops of the traced train step and kernels per step from TensorFlow's profiler."""
    import tempfile

    import tensorflow as tf

    from hvdscale.frameworks import load_framework

    fw = load_framework(cfg.framework)
    fw.set_threads(*threads)
    batches, src_vocab, tgt_vocab = _batches(cfg)
    adapter = fw.make_adapter(cfg.model, cfg.optim, src_vocab, tgt_vocab)
    step = train_step(adapter)
    for _ in range(2):  # warm-up: tracing, allocations
        step(next(batches))
    plain = []
    for _ in range(steps):
        b = next(batches)
        t0 = time.perf_counter()
        step(b)
        plain.append(time.perf_counter() - t0)
    graphs = {}
    for name in TF_STEP_FUNCTIONS:
        fn = getattr(adapter, name, None)
        if fn is None:
            raise HvdscaleError(f"the TF adapter has no traced function {name}")
        graphs[name] = count_graph_ops(fn.get_concrete_function().graph)
    with tempfile.TemporaryDirectory(prefix="hvdscale-tfprof-") as logdir:
        todo = [next(batches) for _ in range(steps)]
        tf.profiler.experimental.start(logdir)
        try:
            t0 = time.perf_counter()
            for b in todo:
                step(b)
            wall = time.perf_counter() - t0
        finally:
            tf.profiler.experimental.stop()
        out = count_tf_kernels(logdir, steps)
    out.update(graph_ops=sum(g["total"] for g in graphs.values()),
               graph_ops_top=sum(g["top"] for g in graphs.values()),
               graph_ops_in_loops=sum(g["in_loops"] for g in graphs.values()),
               graphs={k: {x: v for x, v in g.items() if x != "functions"}
                       for k, g in graphs.items()},
               step_s=statistics.median(plain), profiled_step_s=wall / steps,
               counted_as={"graph_ops": "ops of the traced zero-grad, forward-backward and "
                           "update functions, with the ops of every while-loop body and other "
                           "function they reach counted once", "kernels": "kernels executed "
                           "per step (profiler trace events op_name:OpType)"})
    return out


# --- the command -------------------------------------------------------------------------------

PROFILERS: dict[str, Callable[[RunConfig, int, tuple[int, int]], dict[str, Any]]] = {
    "torch": profile_torch, "tf": profile_tf}


def _time_split(res: dict[str, Any]) -> dict[str, float]:
    """Fractions of the profiled step: RNN, softmax projection, the rest (other operators and
    everything between operators)."""
    wall = res["profiled_step_s"]
    rnn, soft = res["op_s_by_part"]["rnn"], res["op_s_by_part"]["softmax"]
    return {"rnn": rnn / wall, "softmax": soft / wall, "rest": max(0.0, 1 - (rnn + soft) / wall)}


def run_profile(config: str, overrides: list[str] | None = None, steps: int = 2,
                say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Profile the fused and the loop RNN of ``config``; returns one record (``kind: profile``).

    Raises:
        HvdscaleError: a bad config, steps < 1, or a framework without a profiler here.
    """
    if not isinstance(steps, int) or steps < 1:
        raise HvdscaleError(f"--steps must be an integer >= 1 (got {steps!r})")
    cfg = load_config(config, overrides or [])
    if cfg.framework not in PROFILERS:
        raise HvdscaleError(f"hvdscale profile does not support framework={cfg.framework} yet")
    from hvdscale.core.threads import resolve_threads, thread_env
    from hvdscale.records.provenance import git_revision, versions

    threads = resolve_threads(cfg.threads.intra_op, cfg.threads.inter_op, 1)
    for k, v in thread_env(threads[0], "off", 1).items():
        os.environ.setdefault(k, v)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    impls: dict[str, Any] = {}
    for impl in IMPLS:
        c = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, rnn_impl=impl))
        if say:
            say(f"hvdscale profile: {cfg.framework} {impl}, {steps} step(s) after 2 warm-up")
        res = PROFILERS[cfg.framework](c, steps, threads)
        res["time_split"] = _time_split(res)
        impls[impl] = res
    counts = ("graph_ops", "ops", "kernels")
    ratio = {k: impls["loop"][k] / impls["fused"][k] for k in counts
             if k in impls["fused"] and impls["fused"][k]}
    return {
        "schema": 1, "kind": "profile", "status": "ok", "started": started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "name": cfg.name, "framework": cfg.framework,
        "config": to_dict(cfg), "steps": steps,
        "threads": {"intra_op": threads[0], "inter_op": threads[1]},
        "loadavg": {"before": list(load_before), "after": list(os.getloadavg())},
        "versions": versions(), "git": git_revision(), "impls": impls,
        "ratio_loop_fused": ratio, "notes": NOTES,
    }


def markdown(rec: dict[str, Any]) -> str:
    """The notes' operator and kernel tables for this machine and config, and the time split."""
    f, lp = rec["impls"]["fused"], rec["impls"]["loop"]
    r = rec["ratio_loop_fused"]
    m = rec["config"]["model"]
    d = rec["config"]["data"]
    ops_key = "graph_ops" if "graph_ops" in f else "ops"
    ops_what = ("graph ops of the traced train step" if ops_key == "graph_ops"
                else "operators executed per step")
    lines = [f"## Fused vs loop RNN: {rec['name']} ({rec['framework']}, {m['kind']}, "
             f"{m['encoder_layers']}+{m['decoder_layers']} layers, hidden {m['hidden_size']}, "
             f"batch {d['batch_size']}; {rec['threads']['intra_op']} thread(s), "
             f"loadavg {rec['loadavg']['before'][0]:.2f})", "",
             f"Number of operators ({ops_what}):", "",
             "|device|fused|loop|ratio loop/fused|notes: cudnn_lstm|notes: dynamic_rnn|"
             "notes: ratio|", "|:--|--:|--:|--:|--:|--:|--:|",
             f"|CPU (this machine)|{f[ops_key]:,.0f}|{lp[ops_key]:,.0f}|{r.get(ops_key, 0):.1f}|"
             f"212|1,522|7.1|", "",
             "Kernel invocations per training step:", "",
             "|device|fused|loop|ratio loop/fused|notes: cudnn_lstm|notes: dynamic_rnn|"
             "notes: ratio|", "|:--|--:|--:|--:|--:|--:|--:|",
             f"|CPU (this machine)|{f['kernels']:,.0f}|{lp['kernels']:,.0f}|"
             f"{r.get('kernels', 0):.1f}|1,281|37,644|29.4|", "",
             *_phase_table(rec),
             "Where a step's time goes (profiled steps):", "",
             "|impl|step (s, unprofiled)|step (s, profiled)|RNN|softmax projection|rest|",
             "|:--|--:|--:|--:|--:|--:|"]
    for impl in IMPLS:
        x = rec["impls"][impl]
        s = x["time_split"]
        lines.append(f"|{impl}|{x['step_s']:.3f}|{x['profiled_step_s']:.3f}|"
                     f"{100 * s['rnn']:.0f}%|{100 * s['softmax']:.0f}%|{100 * s['rest']:.0f}%|")
    lines.append("")
    return "\n".join(lines)


def _phase_table(rec: dict[str, Any]) -> list[str]:
    """Operators and kernels per step by phase (forward, backward, update), where counted."""
    if "ops_by_phase" not in rec["impls"]["fused"]:
        return []
    lines = ["Per phase (operators / kernels per step):", "",
             "|impl|forward|backward|update|", "|:--|--:|--:|--:|"]
    for impl in IMPLS:
        x = rec["impls"][impl]
        cells = [f"{x['ops_by_phase'][p]:,.0f} / {x['kernels_by_phase'][p]:,.0f}"
                 for p in PHASES]
        lines.append(f"|{impl}|" + "|".join(cells) + "|")
    return [*lines, ""]

"""TensorFlow's side of ``hvdscale profile``: graph ops of the traced train step and kernels
executed per step, split between the RNN, the softmax projection and the rest.

``graph_ops`` are the operations of the traced step's graph, with the ops inside while-loop
bodies counted separately; ``kernels`` the kernels the runtime executed per step (from the
profiler's trace).
"""

from __future__ import annotations

import glob
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from hvdscale.errors import HvdscaleError
from hvdscale.frameworks.profiling import CATEGORIES

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


def profile_steps(adapter: Any, step: Callable[[Any], float], batches: list[Any],
                  step_s: float) -> dict[str, Any]:
    """Graph ops of the traced train step, and kernels per step from TensorFlow's profiler over
    one ``step`` per batch (the caller warmed up and timed unprofiled steps: their median is
    ``step_s``)."""
    steps = len(batches)
    graphs = {}
    for name in TF_STEP_FUNCTIONS:
        fn = getattr(adapter, name, None)
        if fn is None:
            raise HvdscaleError(f"the TF adapter has no traced function {name}")
        graphs[name] = count_graph_ops(fn.get_concrete_function().graph)
    with tempfile.TemporaryDirectory(prefix="hvdscale-tfprof-") as logdir:
        tf.profiler.experimental.start(logdir)
        try:
            t0 = time.perf_counter()
            for b in batches:
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
               step_s=step_s, profiled_step_s=wall / steps,
               counted_as={"graph_ops": "ops of the traced zero-grad, forward-backward and "
                           "update functions, with the ops of every while-loop body and other "
                           "function they reach counted once", "kernels": "kernels executed "
                           "per step (profiler trace events op_name:OpType)"})
    return out

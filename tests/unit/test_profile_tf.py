"""TensorFlow counting of ``hvdscale profile``: graph ops (loop bodies counted once, separately)
and kernels executed (every loop iteration's), on a small traced function with a while loop."""

from __future__ import annotations

import os
import tempfile

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from hvdscale.frameworks.tf.profile import count_graph_ops, count_tf_kernels  # noqa: E402


def _step_fn() -> tuple:
    w = tf.Variable(tf.random.normal([4, 4], seed=1))

    @tf.function(input_signature=[tf.TensorSpec([None, 4]), tf.TensorSpec([], tf.int32)])
    def step(x: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            _, h = tf.while_loop(lambda i, h: i < n,
                                 lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w))),
                                 [tf.constant(0), x])
            loss = tf.reduce_sum(h)
        w.assign_sub(0.1 * tape.gradient(loss, w))
        return loss

    return step


def _kernels(step: object, n: int) -> float:
    x = tf.ones([2, 4])
    step(x, tf.constant(n))  # traced and warm
    with tempfile.TemporaryDirectory() as d:
        tf.profiler.experimental.start(d)
        step(x, tf.constant(n))
        tf.profiler.experimental.stop()
        return count_tf_kernels(d, 1)["kernels"]


def test_graph_ops_count_loop_bodies_once_and_kernels_every_iteration() -> None:
    step = _step_fn()
    g = count_graph_ops(step.get_concrete_function().graph)
    # Forward and gradient while loops: their bodies and conditions are separate functions.
    assert g["in_loops"] > 0 and g["top"] > 0
    assert g["total"] == g["top"] + g["in_loops"] + g["in_functions"]
    assert sum(n for via, n in g["functions"].values() if via in ("While", "StatelessWhile")) \
        == g["in_loops"]
    few, many = _kernels(step, 2), _kernels(step, 12)
    # Each extra iteration runs the forward loop's body (8 kernels) and condition (1) and the
    # gradient loop's (8 and 1) once more: exactly 18 kernels; no bookkeeping events.
    assert many - few == 10 * 18
    assert few > 2 * 18  # the top level's kernels are counted too

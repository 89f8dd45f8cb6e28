"""Evaluation of the same weights gives the same loss under every strategy: the evaluating
rank's loss reaches every rank unchanged and equals one process evaluating the same weights.
tests/mpi_tf/test_eval_same.py holds TensorFlow's cases; tests/unit/test_evaluate.py compares
the two frameworks on the same weights."""

from __future__ import annotations

import pytest

from tests.eval_same import check_same_eval_loss
from tests.mpi_harness import needs_mpi
from tests.noise_probe import check_probe_leaves_training_alone


@pytest.mark.parametrize("strategy", ["horovod", pytest.param("ps", marks=needs_mpi),
                                      "independent"])
@pytest.mark.parametrize("source", ["mapped", "markov"])
def test_same_weights_same_eval_loss(strategy: str, source: str, hvd, comm_world) -> None:
    check_same_eval_loss("torch", strategy, source, comm_world)


@pytest.mark.parametrize("strategy", ["horovod", pytest.param("ps", marks=needs_mpi)])
def test_noise_probe_leaves_the_trained_weights_bit_identical(strategy: str, hvd,
                                                               comm_world) -> None:
    """Issue 33: the gradient-noise probe at each evaluation changes nothing that is trained."""
    check_probe_leaves_training_alone("torch", strategy, comm_world)


@pytest.mark.np3
@needs_mpi
def test_noise_probe_with_a_dedicated_server(comm_world) -> None:
    """The server computes no gradient and adds zeros: np=2 has one contributing rank (null,
    with its why), np=3 two (an estimate)."""
    check_probe_leaves_training_alone("torch", "ps", comm_world, "strategy.ps.placement=dedicated",
                                      "strategy.ps.num_servers=1",
                                      contributing=comm_world.size - 1)

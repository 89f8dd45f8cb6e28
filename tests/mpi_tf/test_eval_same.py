"""Evaluation of the same weights gives the same loss under every strategy: the evaluating
rank's loss reaches every rank unchanged and equals one process evaluating the same weights.
tests/mpi/test_eval_same.py holds PyTorch's cases; tests/unit/test_evaluate.py compares
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
    check_same_eval_loss("tf", strategy, source, comm_world)


@pytest.mark.parametrize("strategy", ["horovod", pytest.param("ps", marks=needs_mpi)])
def test_noise_probe_leaves_the_trained_weights_bit_identical(strategy: str, hvd,
                                                               comm_world) -> None:
    """Issue 33: the gradient-noise probe at each evaluation changes nothing that is trained."""
    check_probe_leaves_training_alone("tf", strategy, comm_world)

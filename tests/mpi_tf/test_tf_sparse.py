"""TensorFlow: sparse embedding gradients (parameter server ``sparse_embeddings=on``, Horovod
``embedding_grads=gathered``) change the parameters as dense merging and one process do, for
sgd, momentum and adam, with repeated ids, ids one rank alone touches and an idle rank; a bad
push is one clear error on every rank. The cases are in tests/sparse_cases.py."""

from __future__ import annotations

import pytest

from hvdscale.core.world import is_gloo_launch
from tests.exactness import PS_CASES
from tests.sparse_cases import OPTIMIZERS, bad_push, gathered_pair, ps_pair

REL_TOL = 1e-4
"""As TensorFlow's dense exactness tests (float32 rounding ~1e-6; the naive mean > 1e-2)."""
needs_mpi_launch = pytest.mark.skipif(is_gloo_launch(),
                                      reason="the parameter server needs an MPI launch")


TF_PS_CASES = [("sgd", p, s) for p, s in PS_CASES] + [("momentum", "colocated", 2),
                                                      ("adam", "colocated", 1)]
"""Every placement with plain SGD (changed-row pulls), momentum with the tables split over two
servers, Adam with one: TensorFlow's tracing makes each case slow, so not the full product."""


@pytest.mark.np3
@needs_mpi_launch
@pytest.mark.parametrize("optim,placement,servers", TF_PS_CASES)
def test_tf_ps_sparse_equals_dense(optim, placement, servers, hvd, comm_world) -> None:
    info = ps_pair("tf", optim, placement, servers, comm_world, REL_TOL)
    ranges = info["sparse_embeddings"]["row_ranges"]
    assert {r["table"] for r in ranges} == {"src_embed.weight", "tgt_embed.weight"}


@pytest.mark.np3
@needs_mpi_launch
@pytest.mark.parametrize("what", ["range", "repeat", "shape"])
def test_tf_ps_bad_push_is_one_error_everywhere(what, hvd, comm_world, monkeypatch) -> None:
    bad_push("tf", comm_world, monkeypatch, what)


@pytest.mark.np3
@pytest.mark.parametrize("optim", list(OPTIMIZERS))
def test_tf_horovod_gathered_equals_dense(optim, hvd, comm_world, monkeypatch) -> None:
    # The tape's IndexedSlices are allgathered (sparse_as_dense=False) in overlap=hooks.
    gathered_pair("tf", optim, comm_world, monkeypatch, REL_TOL)

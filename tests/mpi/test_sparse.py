"""PyTorch: sparse embedding gradients (parameter server ``sparse_embeddings=on``, Horovod
``embedding_grads=gathered``) change the parameters as dense merging and one process do, for
sgd, momentum and adam, with repeated ids, ids one rank alone touches and an idle rank; a bad
push is one clear error on every rank. The cases are in tests/sparse_cases.py."""

from __future__ import annotations

import pytest

from hvdscale.core.world import is_gloo_launch
from tests.exactness import PS_CASES
from tests.sparse_cases import OPTIMIZERS, bad_push, ps_pair, run_pair, sparse_config

REL_TOL = 1e-5
"""As the dense exactness tests: float32 sums in another order; the naive mean is far off."""
needs_mpi_launch = pytest.mark.skipif(is_gloo_launch(),
                                      reason="the parameter server needs an MPI launch")


@pytest.mark.np3
@needs_mpi_launch
@pytest.mark.parametrize("placement,servers", PS_CASES)
@pytest.mark.parametrize("optim", list(OPTIMIZERS))
def test_ps_sparse_equals_dense(optim, placement, servers, hvd, comm_world) -> None:
    info = ps_pair("torch", optim, placement, servers, comm_world, REL_TOL)
    ranges = info["sparse_embeddings"]["row_ranges"]
    assert {r["table"] for r in ranges} == {"src_embed.weight", "tgt_embed.weight"}


@pytest.mark.np3
@needs_mpi_launch
@pytest.mark.parametrize("what", ["range", "shape"])
def test_ps_bad_push_is_one_error_everywhere(what, hvd, comm_world, monkeypatch) -> None:
    bad_push("torch", comm_world, monkeypatch, what)


@pytest.mark.np3
@pytest.mark.parametrize("overlap", ["hooks", "after-backward"])
@pytest.mark.parametrize("optim", list(OPTIMIZERS))
def test_horovod_gathered_equals_dense(optim, overlap, hvd, comm_world) -> None:
    ov = f"strategy.horovod.overlap={overlap}"
    info = run_pair(sparse_config("torch", "horovod", optim, ov,
                                  "strategy.horovod.embedding_grads=gathered"),
                    sparse_config("torch", "horovod", optim, ov), comm_world,
                    lambda s: comm_world.size, REL_TOL)
    assert info["embedding_grads"] == "gathered"

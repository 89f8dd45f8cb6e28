"""PyTorch: sparse embedding gradients (parameter server ``sparse_embeddings=on``, Horovod
``embedding_grads=gathered``) change the parameters as dense merging and one process do, for
sgd, momentum and adam, with repeated ids, ids one rank alone touches and an idle rank; a bad
push is one clear error on every rank. The cases are in tests/sparse_cases.py."""

from __future__ import annotations

import itertools

import pytest

from hvdscale.core.world import is_gloo_launch
from tests.exactness import PS_CASES
from tests.sparse_cases import OPTIMIZERS, bad_push, gathered_pair, ps_pair, run_pair, sparse_config

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


SPLIT_SRC_VOCAB = "model.src_vocab=1400"
"""With it the source table (1400 x 16) is over half of the test model's parameters, so the two
servers' cut falls inside it (at 300 words both tables sit on server 0)."""


@pytest.mark.np3
@needs_mpi_launch
@pytest.mark.parametrize("optim", ["sgd", "momentum"])
def test_ps_sparse_table_split_over_servers(optim, hvd, comm_world) -> None:
    info = ps_pair("torch", optim, "colocated", 2, comm_world, REL_TOL, SPLIT_SRC_VOCAB)
    ranges = info["sparse_embeddings"]["row_ranges"]
    src = sorted((r["server"], r["rows"]) for r in ranges if r["table"] == "src_embed.weight")
    assert len(src) >= 2, f"src_embed.weight not split over servers: {ranges}"
    assert src[0][1][0] == 0 and src[-1][1][1] == 1400  # every row owned, none twice
    assert all(a[1][1] == b[1][0] for a, b in itertools.pairwise(src))


@pytest.mark.np3
@needs_mpi_launch
@pytest.mark.parametrize("who", ["a worker", "a server too"])
@pytest.mark.parametrize("what", ["range", "repeat", "shape"])
def test_ps_bad_push_is_one_error_everywhere(what, who, hvd, comm_world, monkeypatch) -> None:
    # "a server too": rank 0 both pushes and serves, so its own push's problem must join
    # what it finds in the pushes it receives.
    bad_push("torch", comm_world, monkeypatch, what, 0 if who == "a server too" else None)


@pytest.mark.np3
@needs_mpi_launch
def test_ps_sparse_auto_sends_each_table_its_cheaper_way(hvd, comm_world) -> None:
    # auto: the 1400-word source table goes as rows (few touched), a 20-word target table
    # whole (most rows touched): one step's push mixes both, and stays exact.
    ps = ("strategy.ps.placement=colocated", "strategy.ps.num_servers=1", SPLIT_SRC_VOCAB,
          "model.tgt_vocab=20")
    info = run_pair(sparse_config("torch", "ps", "momentum", *ps,
                                  "strategy.ps.sparse_embeddings=auto"),
                    sparse_config("torch", "ps", "momentum", *ps), comm_world,
                    lambda s: s.num_workers, REL_TOL)
    choices = info["sparse_embeddings"]["choices"]
    assert choices["sparse_pushes"] > 0 and choices["dense_pushes"] > 0, choices


@pytest.mark.np3
@pytest.mark.parametrize("overlap", ["hooks", "after-backward"])
@pytest.mark.parametrize("optim", list(OPTIMIZERS))
def test_horovod_gathered_equals_dense(optim, overlap, hvd, comm_world, monkeypatch) -> None:
    gathered_pair("torch", optim, comm_world, monkeypatch, REL_TOL,
                  f"strategy.horovod.overlap={overlap}")

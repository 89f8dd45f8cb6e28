"""The real stack on 2+ ranks: Horovod allreduce/broadcast for both frameworks, mpi4py p2p."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.mpi_harness import needs_mpi


def test_torch_allreduce_sum_and_average(hvd: object) -> None:
    r, n = hvd.rank(), hvd.size()
    x = torch.arange(5, dtype=torch.float32) + 10.0 * r
    total = hvd.allreduce(x, op=hvd.Sum, name="t.sum")
    expected = n * torch.arange(5, dtype=torch.float32) + 10.0 * sum(range(n))
    assert torch.equal(total, expected)
    avg = hvd.allreduce(x, op=hvd.Average, name="t.avg")
    assert torch.allclose(avg, expected / n)


def test_torch_broadcast_parameters(hvd: object) -> None:
    torch.manual_seed(100 + hvd.rank())
    model = torch.nn.Linear(4, 3)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = hvd.allgather(flat.unsqueeze(0), name="t.params")
    for row in gathered:
        assert torch.equal(row, gathered[0])
    torch.manual_seed(100)
    ref = torch.nn.Linear(4, 3)
    assert torch.equal(flat, torch.cat([p.detach().reshape(-1) for p in ref.parameters()]))


def test_tensorflow_allreduce_and_broadcast(hvd: object) -> None:
    tf = pytest.importorskip("tensorflow")
    import horovod.tensorflow as htf

    if not htf.is_initialized():
        htf.init()
    r, n = htf.rank(), htf.size()
    x = tf.constant([1.0, 2.0, 3.0]) * (r + 1)
    total = htf.allreduce(x, op=htf.Sum, name="tf.sum")
    np.testing.assert_allclose(total.numpy(), np.array([1.0, 2.0, 3.0]) * n * (n + 1) / 2)
    v = tf.Variable(tf.fill([3], float(r + 7)))
    htf.broadcast_variables([v], root_rank=0)
    np.testing.assert_array_equal(v.numpy(), np.full(3, 7.0, dtype=np.float32))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(v * float(r + 1))
    tape = htf.DistributedGradientTape(tape)
    (grad,) = tape.gradient(loss, [v])
    # Average over ranks of (r + 1).
    np.testing.assert_allclose(grad.numpy(), np.full(3, (n + 1) / 2))


@needs_mpi
def test_mpi4py_point_to_point_ring(comm_world: object) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    r, n = comm.Get_rank(), comm.Get_size()
    send = np.full(1000, r, dtype=np.float64)
    recv = np.empty_like(send)
    reqs = [comm.Isend(send, dest=(r + 1) % n, tag=7),
            comm.Irecv(recv, source=(r - 1) % n, tag=7)]
    MPI.Request.Waitall(reqs)
    assert np.all(recv == (r - 1) % n)


def test_harness_world_collectives(comm_world: object) -> None:
    w = comm_world
    total = w.allreduce_sum(np.array([1.0, w.rank]))
    assert total.tolist() == [w.size, sum(range(w.size))]
    assert w.allgather(w.rank * 2) == [2 * i for i in range(w.size)]
    assert w.bcast("hello" if w.rank == 0 else None) == "hello"

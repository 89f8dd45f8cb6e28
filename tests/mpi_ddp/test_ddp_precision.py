"""DDP under ``precision`` and ``rnn_impl: compiled`` against one process (issue 41), with the
tolerances measured for Horovod and the parameter server (tests/mpi/test_precision_exactness.py):
the compiled loop in fp32 exact, bf16 bounded with the naive per-rank mean outside the bound,
and fp16's loss scale taken out after DDP's reduction."""

from __future__ import annotations

import pytest

from tests.precision_cases import (
    BF16_TOL,
    FP16_TOL,
    FP32_TOL,
    MARGIN,
    distributed,
    errors,
    precise_config,
)


@pytest.mark.parametrize("precision,impl,tol", [("fp32", "compiled", FP32_TOL),
                                                ("bf16", "loop", BF16_TOL),
                                                ("bf16", "compiled", BF16_TOL),
                                                ("fp16", "loop", FP16_TOL)])
def test_ddp_precision_against_one_process(precision, impl, tol, comm_world) -> None:
    cfg = precise_config("ddp", precision, impl)
    params, strategy = distributed(cfg, comm_world)
    err, wrong = errors(cfg, params, comm_world.size)
    print(f"ddp {impl} {precision}: {err:.2e} (naive {wrong:.2e})")
    assert err < tol, err
    assert wrong > MARGIN * tol, wrong
    if precision == "fp16":  # the scale rode on the reduced gradients and came off unskipped
        assert strategy.adapter.precision_info()["loss_scaler"]["skipped_steps"] == 0

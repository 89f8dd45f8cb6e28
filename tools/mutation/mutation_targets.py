"""What the mutation benchmark mutates, and the tests that claim each part (issue 39).

tools/mutation/bench_mutation.py runs these targets; a new target is one more entry here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One module (or some of its functions) and the tests that claim it."""

    name: str
    path: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()  # "f", "Class.method", "Class.method.inner"; (): all
    np: int = 0  # > 0: the tests run under mpirun -np np
    full: bool = False  # the goal is every non-equivalent mutant killed
    ci: bool = False  # in the CI slice (tests/run.sh phase "mutation-slice")
    ci_tests: tuple[str, ...] = ()  # the slice's tests where fewer suffice (CI's time); (): tests
    others_read: bool = False  # its tests run the copy's code as a second local user


_U, _M = "tests/unit/", "tests/mpi"
TARGETS = (
    Target("peers_wire", "hvdscale/core/peers_wire.py",
           (_U + "test_peers_wire.py", _U + "test_peers_replay.py", _U + "test_peers_hostile.py"),
           full=True, ci=True,
           # test_peers_hostile starts real peers (seconds a mutant); the wire's own tests kill
           # every mutant of the full run without it.
           ci_tests=(_U + "test_peers_wire.py", _U + "test_peers_replay.py")),
    Target("sparse_rows", "hvdscale/strategies/sparse_rows.py",
           (_U + "test_sparse_rows.py", _U + "test_sparse_bytes.py"), full=True),
    Target("noise_scale", "hvdscale/train/noise_scale.py",
           (_U + "test_noise_scale.py", _U + "test_noise_scale_summary.py"),
           functions=("local_sums", "point_from_sums", "b_simple", "NoiseProbe.summary")),
    Target("custom_shapes", "hvdscale/models/custom.py", (_U + "test_shape_mismatch.py",),
           functions=("shape_mismatch",)),
    Target("doctor_network", "hvdscale/doctor/network.py",
           (_U + "test_doctor_named_interface.py", _U + "test_doctor.py"),
           functions=("rendezvous_choice", "check_common", "common_names")),
    Target("lr_rules", "hvdscale/train/lr.py", (_U + "test_lr_rules.py", _U + "test_lr_warmup.py")),
    Target("rendezvous_choice", "hvdscale/core/rendezvous.py", (_U + "test_rendezvous.py",),
           functions=("named_interfaces", "_is_named", "_joins", "_shared_address",
                      "_interface_toward", "_rank0_plan", "job_addresses")),
    Target("peers_addr", "hvdscale/core/peers_addr.py",
           (_U + "test_peers.py", _U + "test_peers_hostile.py"),
           functions=("valid_ipv4", "bind_address")),
    Target("results_store", "hvdscale/records/store.py",
           (_U + "test_shared_results.py", _U + "test_meter_results.py",
            _U + "test_store_limits.py"), others_read=True),
    Target("batching_split", "hvdscale/core/batching/split.py",
           (_U + "test_global_bucketing.py",)),
    Target("lr_warmup", "hvdscale/core/lr_warmup.py", (_U + "test_lr_warmup.py",)),
    # test_until_rules first: each rule at its boundary in milliseconds; test_until's real runs
    # (seconds each) then meet only the mutants those leave.
    Target("until", "hvdscale/train/until.py", (_U + "test_until_rules.py", _U + "test_until.py")),
    Target("bundle_manifest", "launch/bundle_tool.py", (_U + "test_bundle_manifest.py",
           "tests/integration/test_offline_bundle.py", "-k", "manifest"), functions=("check",)),
    Target("horovod_torch_tokens", "hvdscale/frameworks/torch/horovod.py",
           ("tests/mpi/test_exactness.py", "tests/mpi/test_bucketing.py",
            "tests/mpi/test_step_accounting.py", "-k",
            "horovod_equals_one_process_on_union and shipped or average_op or "
            "horovod_uneven_epoch and sum-momentum or horovod_step_marks or "
            "token_request_is_named"),  # sum-momentum: a rank idles
           functions=("HorovodTorch.step",), np=2, full=True),
    # The CI slice's reduction: the loss scale's token weighting (a few mutants, two tests:
    # the backward's start it marks feeds the timeline's step windows).
    Target("horovod_torch_scale", "hvdscale/frameworks/torch/horovod.py",
           ("tests/mpi/test_exactness.py", "tests/mpi/test_step_accounting.py", "-k",
            "average_op or horovod_step_marks"),
           functions=("HorovodTorch.step.scale",), np=2, full=True, ci=True),
    # The sparse exchange's own round (_sparse_exchange) is claimed by the sparse tests (equal
    # to dense, a table split over servers); a bad push, dense or sparse, by the boundaries'.
    Target("ps_tokens", "hvdscale/strategies/param_server.py",
           ("tests/mpi/test_exactness.py", "tests/mpi/test_sparse.py",
            "tests/mpi/test_ps_boundaries.py", "tests/mpi/test_step_accounting.py", "-k",
            "ps_equals_one_process_and_horovod or ps_step_with_one_token or ps_sparse or "
            "ps_bad_push or shorter_dense or bad_token_count or sparse_header or "
            "ps_timings or ps_waits_every"),
           functions=("ParameterServer._exchange", "ParameterServer._sparse_exchange",
                      "ParameterServer.step"), np=2, full=True),
    # test_ddp_phases: what the step tells the watchdog (the phase marks in _step).
    Target("ddp_tokens", "hvdscale/frameworks/torch/ddp.py",
           (_M + "_ddp/test_ddp_exactness.py", _M + "_ddp/test_ddp_phases.py"),
           functions=("DDPStrategy._tokens", "DDPStrategy._step", "DDPStrategy._idle_step"),
           np=2, full=True),
    Target("horovod_tf_tokens", "hvdscale/frameworks/tf/horovod.py",
           ("tests/mpi_tf/test_tf_exactness.py", "tests/mpi_tf/test_tf_token_name.py"),
           functions=("HorovodTF._global_tokens",),
           np=2, full=True),
    # test_mwms_phases: the watchdog's phase and the compute seconds of the step's graph call.
    Target("mwms_tokens", "hvdscale/frameworks/tf/mwms.py",
           (_M + "_mwms/test_mwms_exactness.py", _M + "_mwms/test_mwms_phases.py"),
           functions=("MWMSTF._tokens_fn", "MWMSTF._global_tokens", "MWMSTF.step"),
           np=2, full=True),
)

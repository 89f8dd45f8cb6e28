"""Sum up the junit files of all phases and ranks into one closing line, and fail CI when a
phase ran nothing or a test skipped that is not expected to.

A multi-rank test counts once per launch; it failed if it failed on any rank (the conftest
already copies a rank's failure to the others, this is the belt to those braces). A launch is
a junit file's name without its rank (``single``, ``mpirun-np2``, ...).

Rules, each one failing CI:
* every launch in LAUNCHES has junit files and at least one test that passed in it (a phase in
  which every test skipped, or none was collected, tested nothing);
* every skip matches an entry of EXPECTED_SKIPS: the launch (an fnmatch pattern), the test and a
  part of the skip's reason. A new skip fails until it is listed here with its reason.
"""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ET
from fnmatch import fnmatch
from pathlib import Path

# The launches tests/run.sh makes; each must run at least one test.
LAUNCHES = ("single", "mpirun-np2", "horovodrun-gloo-np2", "mpirun-np3",
            "mpirun-tf-np2", "horovodrun-gloo-tf-np2", "mpirun-tf-np3",
            "mpirun-ddp-np2", "mpirun-ddp-np3", "mpirun-mwms-np2", "mpirun-mwms-np3",
            "torchrun-ddp-np2", "torchrun-cli")

# (launch pattern, test, part of the reason): the only skips CI accepts. A test without its
# [parameters] stands for all of them.
EXPECTED_SKIPS = (
    # horovodrun --gloo starts no MPI job: the parameter server and mpi4py need one.
    ("horovodrun-gloo-*", "tests.mpi.test_ps_boundaries.test_shorter_dense_gradient_is_an_error",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*", "tests.mpi.test_ps_boundaries.test_bad_token_count_is_an_error",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*", "tests.mpi.test_ps_boundaries.test_sparse_bad_token_count_is_an_error",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*",
     "tests.mpi.test_ps_boundaries.test_sparse_header_of_wrong_length_does_not_block_the_server",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*", "tests.mpi.test_ps_boundaries.test_worker_checks_the_servers_row_ids",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*",
     "tests.mpi.test_ps_boundaries.test_worker_checks_row_ids_at_the_tables_end",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*", "tests.mpi.test_exactness.test_ps_equals_one_process_and_horovod",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*",
     "tests.mpi.test_bucketing.test_ps_uneven_epoch_equals_one_process_on_union",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*", "tests.mpi.test_stack.test_mpi4py_point_to_point_ring",
     "mpi4py point-to-point needs an MPI launch"),
    ("horovodrun-gloo-*", "tests.mpi.test_exactness.test_ps_through_staged_host_buffers_is_exact",
     "the parameter server needs an MPI launch"),
    # issue 39: the parameter server's one-token / no-batch step and its sparse auto mode.
    ("horovodrun-gloo-*",
     "tests.mpi.test_step_accounting.test_ps_timings_are_differences_of_its_clock",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*",
     "tests.mpi.test_step_accounting.test_ps_waits_every_request_a_step_starts",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*", "tests.mpi.test_exactness.test_ps_step_with_one_token_or_none_in_all",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*",
     "tests.mpi.test_sparse.test_ps_sparse_auto_sends_each_table_its_cheaper_way",
     "the parameter server needs an MPI launch"),
    # issue 41: the parameter server's cases under precision and the compiled loop.
    ("horovodrun-gloo-*", "tests.mpi.test_precision_exactness.test_compiled_loop_fp32_is_exact",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*",
     "tests.mpi.test_precision_exactness.test_bf16_within_tolerance_and_a_wrong_reduction_outside",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*",
     "tests.mpi.test_global_bucketing.test_ps_global_epoch_equals_one_process_on_global_batches",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-tf-*", "tests.mpi_tf.test_tf_exactness.test_tf_ps_equals_one_process",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-tf-*", "tests.mpi_tf.test_tf_global_bucketing."
     "test_ps_global_epoch_equals_one_process_on_global_batches",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-tf-*",
     "tests.mpi_tf.test_tf_exactness.test_tf_whole_epoch_with_idle_steps_is_exact[ps]",
     "the parameter server needs an MPI launch"),
    # Only its ps cases (4 of its 6 run under --gloo): a skipped horovod case is a failure.
    ("horovodrun-gloo-*", "tests.mpi.test_eval_same.test_same_weights_same_eval_loss[mapped-ps]",
     "needs an MPI launch"),
    ("horovodrun-gloo-*", "tests.mpi.test_eval_same.test_same_weights_same_eval_loss[markov-ps]",
     "needs an MPI launch"),
    ("horovodrun-gloo-tf-*",
     "tests.mpi_tf.test_eval_same.test_same_weights_same_eval_loss[mapped-ps]",
     "needs an MPI launch"),
    ("horovodrun-gloo-tf-*",
     "tests.mpi_tf.test_eval_same.test_same_weights_same_eval_loss[markov-ps]",
     "needs an MPI launch"),
    ("horovodrun-gloo-*", "tests.mpi.test_sparse.test_ps_sparse_equals_dense",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*", "tests.mpi.test_sparse.test_ps_bad_push_is_one_error_everywhere",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-*", "tests.mpi.test_sparse.test_ps_sparse_table_split_over_servers",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-tf-*", "tests.mpi_tf.test_tf_sparse.test_tf_ps_sparse_equals_dense",
     "the parameter server needs an MPI launch"),
    ("horovodrun-gloo-tf-*",
     "tests.mpi_tf.test_tf_sparse.test_tf_ps_bad_push_is_one_error_everywhere",
     "the parameter server needs an MPI launch"),
    # Issue 33: the noise probe's parameter-server cases (its horovod cases run under --gloo).
    ("horovodrun-gloo-*",
     "tests.mpi.test_eval_same.test_noise_probe_leaves_the_trained_weights_bit_identical[ps]",
     "needs an MPI launch"),
    ("horovodrun-gloo-*", "tests.mpi.test_eval_same.test_noise_probe_with_a_dedicated_server",
     "needs an MPI launch"),
    ("horovodrun-gloo-tf-*",
     "tests.mpi_tf.test_eval_same.test_noise_probe_leaves_the_trained_weights_bit_identical[ps]",
     "needs an MPI launch"),
)


def expected_skip(launch: str, test: str, reason: str) -> bool:
    """Whether a skip of ``test`` in ``launch`` with ``reason`` is listed in EXPECTED_SKIPS."""
    return any(fnmatch(launch, lp) and (test == t or test.startswith(t + "[")) and why in reason
               for lp, t, why in EXPECTED_SKIPS)


def collect(reports: str) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """Per (launch, test): the outcome over all ranks, and the skip reason of skipped ones."""
    order = {"skipped": 0, "passed": 1, "failed": 2}  # over ranks: any failure wins, then a pass
    outcomes: dict[tuple[str, str], str] = {}
    reasons: dict[tuple[str, str], str] = {}
    for f in sorted(Path(reports).glob("*.xml")):
        launch = re.sub(r"-rank\d+$", "", f.stem)
        rank = re.search(r"rank(\d+)$", f.stem)
        for case in ET.parse(f).getroot().iter("testcase"):
            # xdist's loadgroup appends "@GROUP" to a test's name (tests/run.sh's single phase).
            name = str(case.get("name")).split("@", 1)[0]
            key = (launch, f"{case.get('classname')}.{name}")
            skipped = case.find("skipped")
            if case.find("failure") is not None or case.find("error") is not None:
                state = "failed"
                where = f" (rank {rank.group(1)})" if rank else ""
                print(f"FAILED [{launch}]{where} {key[1]}")
            elif skipped is not None:
                state = "skipped"
                reasons[key] = skipped.get("message") or ""
            else:
                state = "passed"
            outcomes[key] = max(outcomes.get(key, "skipped"), state, key=order.__getitem__)
    return outcomes, reasons


def main(reports: str, failed_phases: list[str]) -> int:
    outcomes, reasons = collect(reports)
    problems = [f"FAILED phase: {phase}" for phase in failed_phases]
    # The harness's self-test summarises its own single launch (HVDSCALE_SUMMARIZE_LAUNCHES);
    # CI always checks every launch tests/run.sh makes.
    wanted = [x for x in os.environ.get("HVDSCALE_SUMMARIZE_LAUNCHES", "").split(",") if x]
    for launch in wanted or LAUNCHES:
        ran = [k for k, v in outcomes.items() if k[0] == launch and v == "passed"]
        if not ran:
            problems.append(f"FAILED launch {launch}: no test passed in it (none ran, or all "
                            "skipped)")
    for (launch, test), state in sorted(outcomes.items()):
        if state == "skipped" and not expected_skip(launch, test, reasons[(launch, test)]):
            problems.append(f"UNEXPECTED SKIP [{launch}] {test}: {reasons[(launch, test)]!r} "
                            "(list it in tests/summarize.py EXPECTED_SKIPS with its reason, or "
                            "make it run)")
    for line in problems:
        print(line)
    counts = {s: sum(1 for v in outcomes.values() if v == s)
              for s in ("passed", "failed", "skipped")}
    print(f"tests: {counts['passed']} passed, {counts['failed'] + len(problems)} failed, "
          f"{counts['skipped']} skipped")
    return 0 if counts["failed"] == 0 and not problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))

"""Open MPI's fabric transport left out where every rank shares one host (core/threads.py):
its provider probe cost 1.1 s of each rank's start-up with Open MPI 5 on a machine without a
fabric, and shared memory carries such a job. Left in where the job spans hosts or the user
chose the transports to use."""

from __future__ import annotations

import pytest

from hvdscale.core.threads import single_host_mpi_env


@pytest.mark.parametrize("env,want", [
    ({"OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}, {"OMPI_MCA_btl": "^ofi"}),
    ({"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}, {"OMPI_MCA_btl": "^ofi"}),
    # two hosts: the fabric may be what joins them
    ({"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}, {}),
    # the user's own transports win
    ({"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_MCA_btl": "self,tcp"},
     {}),
    # a list of transports left out (horovodrun's ^openib) gets ofi too, once
    ({"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_MCA_btl": "^openib"},
     {"OMPI_MCA_btl": "^openib,ofi"}),
    ({"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
      "OMPI_MCA_btl": "^openib,ofi"}, {}),
    # not started by Open MPI's launcher (a plain process, srun, horovodrun --gloo)
    ({}, {}),
    ({"OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, {}),
])
def test_the_fabric_is_left_out_only_on_one_host(monkeypatch: pytest.MonkeyPatch,
                                                 env: dict[str, str], want: dict[str, str]
                                                 ) -> None:
    for k in ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_btl"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert single_host_mpi_env() == want

"""tests/mpi_mwms runs on every rank with TensorFlow's MultiWorkerMirroredStrategy: no Horovod
(the harness's ``hvd`` fixture is not imported; the session's name ``mwms`` is no framework, so
asking for Horovod here fails), one MWMS per process, made before TensorFlow's runtime starts.
"""

import os

# The session's tag in junit and hang-log names (tests/mpi_harness.py reads it at import).
os.environ["HVDSCALE_TEST_FRAMEWORK"] = "mwms"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Two or three ranks share two cores: one compute thread each (read when TensorFlow starts).
for _var in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402

from tests.mpi_harness import (  # noqa: E402, F401  (pytest finds hooks and fixtures by name)
    _hang_timeout,
    comm_world,
    pytest_configure,
    pytest_runtest_makereport,
    world,
)


@pytest.fixture(scope="session", autouse=True)
def mwms():  # type: ignore[no-untyped-def]
    """This process's MultiWorkerMirroredStrategy (default settings), made before any test runs
    a TensorFlow op: MWMS configures the collectives before the runtime starts, once."""
    from hvdscale.config.strategy import MWMSConfig
    from hvdscale.frameworks.tf.mwms import native

    strategy, _ = native(MWMSConfig(), world())
    return strategy

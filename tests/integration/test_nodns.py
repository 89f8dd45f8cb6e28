"""No phase of a launch, and nothing in ``hvdscale doctor``, waits on name resolution.

One call into the simulated machine without network (tools/testbed/nodns.py: an interface
up, a default route that drops every packet, a name server behind it, a hostname /etc/hosts does
not list, so a lookup waits at least ``LOOKUP_S`` = 15 s instead of failing at once): first proof
that a lookup there does wait and does send, then a 2-rank ``hvdscale run`` (one step) under
mpirun, then ``hvdscale doctor``. Two checks each: no packet leaves the interface (no lookup was
even tried: load-proof), and time bounds: every start-up phase of every rank (the record's
``startup``) under ``LOOKUP_S`` (a phase that waited on one lookup is over it; a phase slowed
by a busy host is not), the doctor under ``DOCTOR_BOUND_S`` and with nothing failed. The whole
call is ended after ``LIMIT_S``. About 25 s on a quiet 2-core machine.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.system_deps import ensure_system_deps
from tools.testbed.nodns import LOOKUP_S, TX, nodns_argv, tx_packets

ROOT = Path(__file__).resolve().parents[2]
DOCTOR_BOUND_S = 4 * LOOKUP_S  # its framework probes alone take 10-30 s on a busy host
LIMIT_S = 300
TINY = ("--set measure.warmup_steps=0 --set measure.steps=1 "
        "--set data.synthetic.sentences_per_rank=64")

pytestmark = pytest.mark.slow


def _script(out: Path) -> str:
    """The shell line run on the simulated machine; each part's result on a marked line."""
    py = sys.executable
    env = (f"cd {ROOT} && export PYTHONPATH={ROOT} OMPI_ALLOW_RUN_AS_ROOT=1 "
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TF_CPP_MIN_LOG_LEVEL=2")
    return " ; ".join([
        env,
        f'echo "TX0=$({TX})"',
        # A lookup must still be waiting after 2 s (timeout's exit 124), not fail at once.
        "timeout 2 getent hosts hvdscale-nodns-probe.example; echo LOOKUP_RC=$?; sleep 1",
        f'echo "TX1=$({TX})"',
        f"mpirun -np 2 --bind-to none {py} -m hvdscale run configs/demo.yaml {TINY} "
        f"--quiet --out {out}; echo RUN_RC=$?",
        f'echo "TX2=$({TX})"',
        "echo DOCTOR_T0=$(date +%s.%N)",
        f"{py} -m hvdscale doctor >/dev/null; echo DOCTOR_RC=$?",
        "echo DOCTOR_T1=$(date +%s.%N)",
        f'echo "TX3=$({TX})"',
    ])


def _marked(text: str, name: str) -> str:
    m = re.search(rf"^{name}=(.+)$", text, re.M)
    assert m, f"{name} missing:\n{text[-3000:]}"
    return m.group(1)


def _run(argv: list[str]) -> str:
    """stdout and stderr of ``argv``; past ``LIMIT_S`` it and everything it started end, and
    the test fails (only a wait on a lookup takes that long)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        return proc.communicate(timeout=LIMIT_S)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        text = proc.communicate()[0]
        pytest.fail(f"over {LIMIT_S} s on a machine without network (a name lookup there "
                    f"waits {LOOKUP_S} s):\n{text[-3000:]}")


def test_no_phase_and_no_doctor_check_waits_on_name_resolution(tmp_path: Path) -> None:
    ensure_system_deps("ip", "unshare")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    out = tmp_path / "results"
    text = _run(nodns_argv(tmp_path, _script(out)))
    tx = [tx_packets(_marked(text, f"TX{k}")) for k in range(4)]
    assert _marked(text, "LOOKUP_RC") == "124" and tx[1] > tx[0], \
        "a lookup did not wait, or sent nothing: the simulated machine is wrong"
    assert _marked(text, "RUN_RC") == "0", text[-3000:]
    assert tx[2] == tx[1], f"the launch sent {tx[2] - tx[1]} packet(s): a name lookup ({tx})"
    rec = json.loads((out / "results.jsonl").read_text().splitlines()[-1])
    assert len(rec["startup"]["per_rank"]) == 2
    slow = [(e["rank"], p, s) for e in rec["startup"]["per_rank"]
            for p, s in e["phases"].items() if s >= LOOKUP_S]
    assert not slow, f"phases over {LOOKUP_S} s, what a name lookup waits: {slow}"
    assert _marked(text, "DOCTOR_RC") == "0", text[-3000:]
    assert tx[3] == tx[2], f"hvdscale doctor sent {tx[3] - tx[2]} packet(s): a name lookup"
    doctor_s = float(_marked(text, "DOCTOR_T1")) - float(_marked(text, "DOCTOR_T0"))
    assert doctor_s < DOCTOR_BOUND_S, f"hvdscale doctor took {doctor_s:.1f} s without network"

"""Facts only an import can tell (torch, TensorFlow, Horovod's compiled extensions), each read
in a subprocess of its own with a time limit.

Importing TensorFlow costs seconds and a broken install can crash or hang the importer, so the
doctor never imports a framework itself: ``run_probes`` starts ``python -m
hvdscale.doctor.probe FRAMEWORK`` per installed framework (in parallel) and reads one JSON line
back. Loading ``horovod.torch`` / ``horovod.tensorflow`` there is what tells whether Horovod's
installed build fits the installed framework: a build for another version fails to load its
extension with ``undefined symbol: ...``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

MARK = "hvdscale-probe: "
HOROVOD_MODULE = {"torch": "horovod.torch", "tf": "horovod.tensorflow"}
# The launcher's variables stay out of the probes: nothing there may join (or start) an MPI job.
_LAUNCH_PREFIXES = ("OMPI_", "PMIX_", "PMI_", "HOROVOD_")


def _error_text(e: BaseException) -> str:
    """``Type: message``, with the cause's message too (Horovod wraps the ImportError)."""
    text = f"{type(e).__name__}: {e}"
    if e.__cause__ is not None and str(e.__cause__) not in text:
        text += f" (caused by {type(e.__cause__).__name__}: {e.__cause__})"
    return text


def probe_horovod(framework: str) -> dict[str, Any]:
    """Whether Horovod is installed, whether its ``framework`` extension loads, its build."""
    if importlib.util.find_spec("horovod") is None:
        return {"installed": False}
    try:
        hvd = importlib.import_module(HOROVOD_MODULE[framework])  # hvd: loads the extension
    except Exception as e:  # the point of the probe: any failure to load is the finding
        return {"installed": True, "loads": False, "error": _error_text(e)}
    built = {}
    for what in ("mpi", "gloo", "nccl", "cuda", "rocm", "ccl", "ddl"):
        fn = getattr(hvd, f"{what}_built", None)
        built[what] = int(fn()) if fn is not None else 0
    return {"installed": True, "loads": True, "built": built}


def probe_torch() -> dict[str, Any]:
    """torch's version, CUDA/cuDNN/NCCL versions and the GPUs it sees."""
    import torch

    out: dict[str, Any] = {"version": torch.__version__, "cuda": torch.version.cuda,
                           "cudnn": None, "nccl": None, "gpus": []}
    try:
        out["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # a build without cuDNN: none to report
        pass
    if torch.version.cuda:
        try:
            v = torch.cuda.nccl.version()
            out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:  # CUDA build without NCCL: none to report
            pass
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            out["gpus"].append({"name": p.name, "memory": int(p.total_memory),
                                "capability": f"{p.major}.{p.minor}"})
    return out


def probe_tf() -> dict[str, Any]:
    """TensorFlow's version, its CUDA/cuDNN build and the GPUs it sees."""
    import tensorflow as tf

    info = dict(tf.sysconfig.get_build_info())
    gpus = [{"name": d.name, "memory": 0, "capability": ""}
            for d in tf.config.list_physical_devices("GPU")]
    return {"version": tf.__version__, "cuda": info.get("cuda_version"),
            "cudnn": info.get("cudnn_version"), "nccl": None, "gpus": gpus}


def probe(framework: str) -> dict[str, Any]:
    """The framework's facts and Horovod's for it; an import failure is reported, not raised."""
    try:
        facts: dict[str, Any] = {"ok": True, **(probe_torch() if framework == "torch"
                                                else probe_tf())}
    except Exception as e:
        return {"ok": False, "error": _error_text(e), "horovod": {}}
    facts["horovod"] = probe_horovod(framework)
    return facts


def main(argv: list[str]) -> int:
    """``python -m hvdscale.doctor.probe torch|tf``: print the facts as one marked JSON line."""
    print(MARK + json.dumps(probe(argv[0])), flush=True)
    return 0


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_LAUNCH_PREFIXES)}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _read(framework: str, proc: subprocess.Popen, timeout: float) -> dict[str, Any]:
    """The probe's facts from its output, or what went wrong (crash, time limit)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"ok": False, "error": f"importing {framework} took over {timeout:g}s",
                "horovod": {}}
    for line in reversed(out.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    tail = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return {"ok": False, "error": f"the {framework} probe died: {tail}", "horovod": {}}


def run_probes(frameworks: list[str], timeout: float = 120.0) -> dict[str, dict[str, Any]]:
    """Probe each of ``frameworks`` (``torch``, ``tf``) in its own subprocess, in parallel."""
    procs = {fw: subprocess.Popen([sys.executable, "-m", "hvdscale.doctor.probe", fw],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=_child_env())
             for fw in frameworks}
    return {fw: _read(fw, p, timeout) for fw, p in procs.items()}


if __name__ == "__main__":
    from hvdscale.core.startup import exit_now

    # Printed and flushed: the framework's teardown (seconds for TensorFlow) is not waited for.
    exit_now(main(sys.argv[1:]))

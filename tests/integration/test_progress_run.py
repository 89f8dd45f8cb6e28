"""Progress of real runs: plain lines into a pipe and a file (a SLURM output file), --quiet,
rank 0 only under mpirun, and the live line plus Ctrl-C under mpirun on a terminal."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.tagged import by_rank

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
# Long enough (tens of steps at ~0.1 s) for several lines at a 0.5 s interval.
RUN = ["hvdscale", "run", "configs/demo.yaml", "--set", "measure.warmup_steps=2",
       "--set", "measure.steps=40", "--set", "data.synthetic.sentences_per_rank=256"]
MEASURED = re.compile(r"^hvdscale: measured step (\d+)/40 \| ")
SUMMARY = re.compile(r"^hvdscale: nmt/torch/fused/horovod ranks=\d words/s=")

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("into", ["pipe", "file"])
def test_plain_progress_lines_into_a_pipe_or_a_file(into: str, tmp_path: Path) -> None:
    cmd = [*RUN, "--out", str(tmp_path), "--progress-every", "0.5"]
    if into == "pipe":
        r = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
        out = r.stdout
    else:  # what lands in a SLURM job's output file
        with open(tmp_path / "slurm-1.out", "w") as f:
            r = subprocess.run(cmd, cwd=ROOT, env=ENV, stdout=f, stderr=subprocess.PIPE,
                               text=True, timeout=300)
        out = (tmp_path / "slurm-1.out").read_text()
    assert r.returncode == 0, r.stderr
    assert "\r" not in out and "\x1b" not in out  # plain lines only, nothing rewritten
    lines = out.splitlines()
    assert SUMMARY.match(lines[-1]), lines[-1]
    assert all(ln.startswith("hvdscale: ") for ln in lines)
    steps = [int(m.group(1)) for ln in lines if (m := MEASURED.match(ln))]
    assert len(steps) >= 2, out
    assert steps == sorted(steps) and steps[-1] > steps[0], steps
    assert any("words/s (rank 0)" in ln and " left | " in ln for ln in lines), out


def test_quiet_prints_only_the_summary(tmp_path: Path) -> None:
    r = subprocess.run([*RUN, "--out", str(tmp_path), "--progress-every", "0.5", "--quiet"],
                       cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (line,) = r.stdout.splitlines()
    assert SUMMARY.match(line), line


def test_bad_interval_is_one_clear_error(tmp_path: Path) -> None:
    r = subprocess.run([*RUN, "--out", str(tmp_path), "--progress-every", "0"], cwd=ROOT,
                       env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--progress-every: must be a positive number of seconds (got '0')" in r.stderr


def test_under_mpirun_progress_comes_from_rank_0_only(tmp_path: Path) -> None:
    r = subprocess.run(["mpirun", "-np", "2", "--tag-output", *RUN, "--out", str(tmp_path),
                        "--progress-every", "0.5"], cwd=ROOT, env=ENV, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    # By tag, not by line: two ranks' chunks can meet inside one line of mpirun's output.
    tagged = [(rank, ln) for rank, _, chunk in by_rank(r.stdout)
              for ln in chunk.splitlines() if "hvdscale: " in ln]
    assert {rank for rank, _ in tagged} == {0}, r.stdout
    steps = [int(m.group(1)) for _, ln in tagged if (m := MEASURED.match(ln))]
    assert len(steps) >= 2 and steps[-1] > steps[0], r.stdout
    assert "\r" not in r.stdout  # mpirun's output is a pipe here: plain lines


# Open MPI 4 answers Ctrl-C with SIGCONT, a blocking sleep of odls_base_sigkill_timeout
# seconds (1 by default; mpirun forwards no output meanwhile), SIGTERM, the same sleep, then
# SIGKILL: a rank has that long to write its line. Once in CI the line never came under the
# default 1 s (most likely the 2-core machine stalled; not reproduced here). 5 s still checks
# that the SIGTERM handler writes the line, with a margin for such a stall.
SIGKILL_AFTER = {"OMPI_MCA_odls_base_sigkill_timeout": "5"}


def test_ctrl_c_under_mpirun_on_a_terminal_leaves_a_clean_line(tmp_path: Path) -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: mpirun on a terminal, as a user starts it
        # A shell gives its foreground job SIGINT at its default, whatever pytest inherited
        # (a suite started with `cmd &` from a script has it ignored; issue 49).
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.chdir(ROOT)
        os.execvpe("mpirun", ["mpirun", "-np", "2", *RUN[:-4], "--out", str(tmp_path),
                              "--set", "measure.steps=100000"], {**ENV, **SIGKILL_AFTER})
    out = b""
    sent_at = None
    deadline = time.monotonic() + 240
    status = None
    try:
        while time.monotonic() < deadline:
            if sent_at is None and re.search(rb"measured step ([3-9]|\d\d+)/", out):
                os.write(fd, b"\x03")  # Ctrl-C typed at the terminal
                sent_at = time.monotonic()
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: the terminal's other side is closed
                    break
                if not data:
                    break
                out += data
        for sig in (signal.SIGTERM, signal.SIGKILL):  # SIGTERM first: mpirun ends its ranks
            for _ in range(150):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.2)
            if done:
                break
            os.kill(pid, sig)
    finally:
        os.close(fd)
    text = out.decode(errors="replace")
    assert sent_at is not None, text[-2000:]
    assert status is not None and os.waitstatus_to_exitcode(status) != 0
    # The live line was rewritten in place, then ended with the step reached and a newline.
    assert "\r\x1b[Khvdscale: measured step " in text
    m = re.search(r"\r\x1b\[Khvdscale: interrupted at measured step (\d+)/100000 [^\r\n]*\r?\n",
                  text)
    assert m and int(m.group(1)) >= 3, text[-2000:]
    assert "\r\x1b[K" not in text[m.end():]  # no live line after it

# The two commands of README: `make demo` and `make test`. Each installs first, into the
# current Python (no virtual environment; launch/install.sh): 6 min 15 s the first time on a
# fresh 2-core VM of the project's kind, 97 s again (load 13-16). `make demo`: the install plus
# 2 rounds of its sweep, about 10 min cold on a quiet machine; 101 s again (it prints the
# report). `make test`: about 40 minutes on a fresh machine, as root (it installs and starts
# SLURM, munge and sshd, and makes network namespaces). Measured durations and their machine:
# README, "How long each command takes".
.PHONY: install demo demo-native test lint bench
install:
	bash launch/install.sh
demo: install
	bash launch/demo.sh
demo-native: install
	bash launch/demo_native.sh
test: install
	bash tests/run.sh
lint:
	ruff check .
bench: install
	bash bench/run_all.sh

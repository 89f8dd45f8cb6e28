# The two commands of README: `make demo` and `make test`. Each installs first, into the
# current Python (no virtual environment; launch/install.sh): 5 min 09 s the first time on a
# 2-core VM of the project's kind, 97 s again (load 13-16). `make demo`: the install plus 2
# rounds of its sweep (1 min 31 s, one launch per round and rank count); again, it prints the
# report. `make test`: 36 min 02 s on CI's fresh machine (its last run), install included, as
# root (it installs and starts SLURM, munge and sshd, and makes network namespaces). Measured durations, their machine and raw
# files: README, "How long each command takes".
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

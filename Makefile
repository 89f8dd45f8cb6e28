# The two commands of README: `make demo` and `make test` (each installs first; the install is
# idempotent and takes seconds once the Horovod wheel is cached).
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

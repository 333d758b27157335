# The two commands of this project (and make docs, the documentation site):
#   make demo   runs the main job on an embedded sample
#   make test   runs every test (Rust, Python, zarr 2), and the lints
#               (stubtest with the Python tests: it needs the built package)
# Both install what is missing: Debian packages (as root), a Rust toolchain,
# and the Python virtual environments .venv and .venv-zarr2, from the lock
# files in python/locks/ (make lock renews them; make test-latest first tries
# the newest releases, unlocked).

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
ZARR2_VENV := .venv-zarr2
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(HOME)/.cargo/bin:$(PATH)
export PYO3_PYTHON := $(abspath $(PY))

.PHONY: demo test setup lock test-latest rust-test python-test lint stubtest docs wheel develop wheel-check bench-cpu

demo: develop
	$(PY) examples/demo.py

test: lint rust-test python-test

setup: $(VENV)/.ready

$(VENV)/.ready: scripts/setup.sh $(wildcard python/locks/*.txt)
	bash scripts/setup.sh $(VENV) $(ZARR2_VENV)
	touch $@

# Every package of .venv and .venv-zarr2 pinned and hashed, anew from the
# bounds in python/requirements-*.txt, for each supported Python version.
lock: setup
	bash scripts/lock.sh $(VENV)/bin/uv

# The Python tests in a fresh venv with the newest releases the bounds admit,
# unlocked (outside CI): the drift the next `make lock` would bring in.
test-latest: wheel
	bash scripts/test-latest.sh $(WHEEL_DIR) .venv-latest

lint: setup
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace
	$(PY) -m ruff check $(wildcard python benches examples)
	$(PY) -m ruff format --check $(wildcard python benches examples)
	# The package from the source tree: lint runs before it is installed.
	MYPYPATH=python $(PY) -m mypy --strict --follow-imports=silent python/typing/user_script.py
	bash scripts/check-msrv.sh
	bash scripts/check-features.sh
	bash scripts/regenerate-ptx.sh --check
	$(PY) -m mkdocs build --strict --quiet

# The documentation site in site/, the Rust API (cargo doc) in site/rust-api/.
docs: setup
	$(PY) -m mkdocs build --strict
	cargo doc --no-deps --workspace
	rm -rf site/rust-api
	cp -r "$$(cargo metadata --format-version 1 --no-deps | $(PY) -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/doc" site/rust-api

rust-test: setup
	cargo test --workspace

WHEEL_DIR := dist

# One release build serves the tests (develop) and the wheel check.
wheel: setup
	rm -rf $(WHEEL_DIR)
	cd python && $(abspath $(PY)) -m maturin build --release --quiet --out $(abspath $(WHEEL_DIR))

develop: wheel
	$(PY) -m pip install -q --force-reinstall --no-deps $(WHEEL_DIR)/*.whl

wheel-check: wheel
	bash scripts/wheel-check.sh $(WHEEL_DIR) .venv-wheel

# The stubs (python/zarrs_nvcomp/*.pyi, and the signatures of the .py
# modules) against the installed package, so after develop; the allowlist
# names what stubtest reports that is not a mismatch, each with why.
stubtest: develop
	$(PY) -m mypy.stubtest --mypy-config-file python/typing/stubtest.ini \
		--allowlist python/typing/stubtest-allowlist.txt zarrs_nvcomp

python-test: develop stubtest
	$(PY) -m pytest -q python/tests
	bash scripts/zarr-pipeline-tests.sh $(PY)
	ZARR2_WHEEL_DIR=$(abspath $(WHEEL_DIR)) bash scripts/zarr2-tests.sh $(ZARR2_VENV)

bench-cpu: develop
	cargo bench --bench cpu_backend
	cargo bench --bench cpu_decode
	$(PY) benches/cpu_vs_numcodecs.py

# alloclab — two commands do everything on a fresh machine:
#   make run    set up, then reproduce the seed experiments at laptop scale (tables, CSV, plots under results/)
#   make test   set up, then lint and run every test (ctest, pytest, the notebooks)
# and `make bench` runs the Google Benchmark microbenchmarks. Every target sets itself up idempotently: missing
# system packages are installed with apt-get when root (otherwise the exact command is printed), .venv is created,
# the package is installed editable with its extras, and only what changed is rebuilt.

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
BUILD := build
CPP_BUILD := $(BUILD)/cpp
STAMPS := $(BUILD)/stamps
SYS_PACKAGES := libhwloc-dev libgtest-dev libbenchmark-dev libboost-context-dev libck-dev pkg-config clang-format chromium
CPP_SOURCES := $(shell find cpp -name '*.cpp' -o -name '*.hpp') CMakeLists.txt
PY_BUILD_DEPS := 'scikit-build-core>=0.10' 'pybind11>=2.12' 'cmake>=3.20' ninja
CMAKE := $(abspath $(VENV))/bin/cmake
CTEST := $(abspath $(VENV))/bin/ctest
LOCK := flock $(STAMPS)/.lock
QUIET_PIP := 2>&1 | { grep -v '^WARNING: Location' || true; }  # this machine's pip config warns per package

.PHONY: run test bench lint format install cpp sysdeps clean test-cpp test-py test-asan test-tsan

run: install
	$(VENV)/bin/alloclab reproduce all --quick

test: install cpp lint test-cpp test-py

test-cpp: cpp
	cd $(CPP_BUILD) && $(CTEST) --output-on-failure -j2

test-py: install
	$(VPY) -m pytest -q python/tests

bench: cpp
	$(CPP_BUILD)/alloclab_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
	  --benchmark_enable_random_interleaving=true \
	  --benchmark_out=$(BUILD)/bench.json --benchmark_out_format=json

# Sanitizers: AddressSanitizer + UndefinedBehaviorSanitizer over the C++ tests and over the Python tests with the
# sanitized module (leak checking is off there: CPython itself keeps memory until exit); ThreadSanitizer over the
# C++ tests, which run every lock kind and every scenario on threads. libstdc++ is preloaded with libasan because
# python does not link it, and ASan must see __cxa_throw when it starts.
ASAN_DIR := $(BUILD)/asan
TSAN_DIR := $(BUILD)/tsan
SAN_CMAKE = $(CMAKE) -S . -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOCLAB_TESTS=ON \
	  -DPython_EXECUTABLE=$(abspath $(VPY)) -Dpybind11_DIR=$$($(VPY) -m pybind11 --cmakedir)

test-asan: install
	$(LOCK) $(SAN_CMAKE) -B $(ASAN_DIR) -DALLOCLAB_SANITIZE=address,undefined -DALLOCLAB_PYTHON=ON >/dev/null
	$(LOCK) $(CMAKE) --build $(ASAN_DIR)
	cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=1 $(CTEST) --output-on-failure -j2
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so)" ASAN_OPTIONS=detect_leaks=0 \
	  $(VPY) python/tests/run_sanitized.py $(ASAN_DIR) -q -p no:cacheprovider python/tests

test-tsan: install
	$(LOCK) $(SAN_CMAKE) -B $(TSAN_DIR) -DALLOCLAB_SANITIZE=thread -DALLOCLAB_PYTHON=OFF >/dev/null
	$(LOCK) $(CMAKE) --build $(TSAN_DIR)
	cd $(TSAN_DIR) && TSAN_OPTIONS=halt_on_error=1 $(CTEST) --output-on-failure -j2

lint: install
	$(VPY) tools/check_layers.py
	cd python && ../$(VENV)/bin/lint-imports --no-cache --no-logo ../pyproject.toml
	clang-format --dry-run --Werror $$(find cpp -name '*.cpp' -o -name '*.hpp')
	$(VENV)/bin/ruff check python tools $(wildcard experiments)
	$(VENV)/bin/ruff format --check python tools $(wildcard experiments)

format: install
	clang-format -i $$(find cpp -name '*.cpp' -o -name '*.hpp')
	$(VENV)/bin/ruff format python tools $(wildcard experiments)

# --- set-up ---------------------------------------------------------------------------------------------------

sysdeps: $(STAMPS)/sysdeps
$(STAMPS)/sysdeps: Makefile  # re-checked when SYS_PACKAGES changes
	@mkdir -p $(STAMPS)
	@missing=""; for p in $(SYS_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing system packages:$$missing"; \
	    (apt-get install -y -qq $$missing || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing)) >/dev/null; \
	  else \
	    echo "alloclab needs system packages. Run:  sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi
	@touch $@

$(STAMPS)/venv: pyproject.toml | $(STAMPS)/sysdeps
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip $(QUIET_PIP)
	$(VPY) -m pip install -q $(PY_BUILD_DEPS) $(QUIET_PIP)
	@touch $@

install: $(STAMPS)/install
# The build stamps take the time the build started (touched first, moved into place on success): a source saved
# while a build runs is newer than its stamp, so the next make builds again.
$(STAMPS)/install: $(STAMPS)/venv $(CPP_SOURCES) pyproject.toml
	@touch $@.new
	$(LOCK) $(VPY) -m pip install -q --no-build-isolation -e '.[test,notebooks,cluster]' $(QUIET_PIP)
	@mv $@.new $@

cpp: $(STAMPS)/cpp
$(STAMPS)/cpp: $(STAMPS)/venv $(CPP_SOURCES)
	@touch $@.new
	$(LOCK) $(CMAKE) -S . -B $(CPP_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DALLOCLAB_PYTHON=OFF \
	  -DALLOCLAB_TESTS=ON -DALLOCLAB_BENCH=ON >/dev/null
	$(LOCK) $(CMAKE) --build $(CPP_BUILD)
	@mv $@.new $@

clean:
	rm -rf $(BUILD) $(VENV)

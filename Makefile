# RunSnack: the two commands a new user needs are `make demo` and `make test`.
# Builds use Ninja and ccache; JOBS defaults to the machine's cores.

JOBS ?= $(shell nproc)
DEV := build/dev
RELEASE := build/release
CMAKE := cmake -G Ninja -Wno-dev

.PHONY: all deps deps-binary build release binary deb test unit fuzz demo demo-train bench clean

all: build

deps:
	@scripts/install-deps

deps-binary:
	@scripts/install-deps --binary

# Debug with AddressSanitizer and UBSan: what the tests run.
build: deps
	@[ -f $(DEV)/build.ninja ] || $(CMAKE) -S . -B $(DEV) -DCMAKE_BUILD_TYPE=Debug -DRUNSNACK_SANITIZE=ON >/dev/null
	ninja -C $(DEV) -j$(JOBS)

release: deps
	@[ -f $(RELEASE)/build.ninja ] || $(CMAKE) -S . -B $(RELEASE) -DCMAKE_BUILD_TYPE=Release >/dev/null
	ninja -C $(RELEASE) -j$(JOBS)

# Only the release binary and what it needs to build and run: what the demos use
# (a third of the release targets; no tests, benchmarks or test peers).
binary: deps-binary
	@[ -f $(RELEASE)/build.ninja ] || $(CMAKE) -S . -B $(RELEASE) -DCMAKE_BUILD_TYPE=Release >/dev/null
	ninja -C $(RELEASE) -j$(JOBS) runsnack

# The Debian package of the release build, in build/deb (docs/INSTALL.md):
#   sudo apt install ./build/deb/runsnack_*.deb
deb: release
	scripts/build-deb $(RELEASE) build/deb

# The whole suite: short fuzz runs, then unit, interop and end-to-end tests
# (ctest last, so its summary is the final line).
test: build
	JOBS=$(JOBS) scripts/run-fuzzers
	ctest --test-dir $(DEV) --output-on-failure -j$(JOBS)

unit: build
	ctest --test-dir $(DEV) --output-on-failure -j$(JOBS) -L unit

fuzz: deps
	FUZZ_SECONDS=$${FUZZ_SECONDS:-60} JOBS=$(JOBS) scripts/run-fuzzers

demo: binary
	scripts/demo $(RELEASE)/src/cli/runsnack

# A training job on a local pool (examples/train): PyTorch and Fashion-MNIST from Debian.
demo-train: binary
	@scripts/install-deps --train
	scripts/demo-train $(RELEASE)/src/cli/runsnack

bench: release
	bench/run.sh $(RELEASE)
	bench/forward.sh $(RELEASE)
	bench/run_bench.sh $(RELEASE)/src/cli/runsnack
	bench/pool_bench.py $(RELEASE)/src/cli/runsnack
	bench/render_pool_bench.py $(RELEASE)/src/cli/runsnack
	$(RELEASE)/bench/matmul_bench 4096 1024 10
	$(RELEASE)/bench/poolsim

clean:
	rm -rf build

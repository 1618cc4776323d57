# SPDX-License-Identifier: GPL-2.0
#
# rdma_rxe_rust: build a test kernel with this overlay and run it in QEMU.
#
#   make          set up what is missing, build, boot the VM, run the demo
#   make test     build, then run every test and print a TAP report
#   make interop  build, then two VMs joined by a wire: rdma_rxe_rust in one,
#                 the C rdma_rxe in the other (scripts/interop)
#   make long     build, then the hostile network at full size, hours: 10^6
#                 fuzzed packets under traffic, 100 rounds of each removal
#                 under traffic (tests/run --long: LONG_SUITES, FUZZ_COUNT,
#                 TEARDOWN_ROUNDS, TEARDOWN_KINDS, TEARDOWN_DRIVER, LONG_TIMEOUT)
#   make build    set up and build only (the debug test kernel, modules)
#   make kernel-plain  the same kernel without the debug checkers, in
#                 build/obj-plain (for benchmarks; only when asked)
#   make bench    perftest, C rdma_rxe vs rdma_rxe_rust in one VM boot (not a
#                 test; builds kernel-plain on demand; BENCH_ARGS=--quick,
#                 BENCH_KERNEL=debug: see scripts/bench --help)
#   make shell    interactive shell in the VM (scripts/vm-run --shell)
#   make fuzz     fuzz the protocol core's parsers, bounded (FUZZ_TIME s per target)
#   make clean    remove the kernel build output (keeps downloads)
#   make distclean  remove build/ entirely
#
# Every phase is incremental and prints its wall time.

B := $(CURDIR)/build
PRISTINE := $(B)/linux-7.2
SRC := $(B)/src
OBJ := $(B)/obj
MODROOT := $(B)/modroot
PLAIN_OBJ := $(B)/obj-plain
PLAIN_MODROOT := $(B)/modroot-plain
PHASE := scripts/phase
BENCH_KERNEL ?= plain

.PHONY: all build deps sources overlay config kernel kernel-plain bench demo test long interop shell fuzz clean distclean

all: build
	@$(PHASE) demo scripts/vm-run --timeout 600 -- scripts/demo

build: kernel

deps:
	@$(PHASE) deps scripts/install-deps

sources: deps
	@$(PHASE) sources scripts/fetch-sources $(B)

overlay: sources
	@$(PHASE) overlay scripts/overlay $(PRISTINE) $(SRC)

config: overlay
	@$(PHASE) config scripts/configure-kernel $(SRC) $(OBJ)

kernel: config
	@$(PHASE) kernel scripts/build-kernel $(SRC) $(OBJ) $(MODROOT)
	@$(PHASE) testmods scripts/build-test-modules $(SRC) $(OBJ) $(MODROOT)

kernel-plain: overlay
	@$(PHASE) config-plain scripts/configure-kernel $(SRC) $(PLAIN_OBJ) rxe_rust_vm.config
	@$(PHASE) kernel-plain scripts/build-kernel $(SRC) $(PLAIN_OBJ) $(PLAIN_MODROOT)
	@$(PHASE) testmods-plain scripts/build-test-modules $(SRC) $(PLAIN_OBJ) $(PLAIN_MODROOT)

test: build
	@$(PHASE) test tests/run

long: build
	@$(PHASE) long tests/run --long

interop: build
	@$(PHASE) interop scripts/interop

bench: $(if $(filter debug,$(BENCH_KERNEL)),kernel,kernel-plain)
	@$(PHASE) bench scripts/bench --kernel $(BENCH_KERNEL) $(BENCH_ARGS)

shell: build
	scripts/vm-run --shell

fuzz:
	@command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
	@$(PHASE) fuzz tools/rxe-roce/fuzz.sh

clean:
	rm -rf $(OBJ) $(MODROOT) $(PLAIN_OBJ) $(PLAIN_MODROOT) $(B)/vm $(B)/test-modules*

distclean:
	rm -rf $(B)

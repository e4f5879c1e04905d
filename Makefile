# MCCL: a plain Makefile.  `make` builds, `make check` runs every test,
# `make demo` runs a 3-node cluster on loopback.  See README.md.

PREFIX	?= /usr/local
DESTDIR	?=
BINDIR	 = $(PREFIX)/bin
SBINDIR	 = $(PREFIX)/sbin
LIBDIR	 = $(PREFIX)/lib
INCDIR	 = $(PREFIX)/include
MANDIR	 = $(PREFIX)/share/man

CC	?= cc
B	 = build
# Debian's python3 (the one python3-numpy and python3-torch are for).
PYTHON	?= /usr/bin/python3
SONAME	 = libmccl.so.0
LIBVER	 = 0.1.0

# Debian packages the build and the tests need: pkg-config module or
# command -> package.
DEB_PKGS = libevent-dev libjansson-dev libsystemd-dev check libsodium-dev \
	   libibverbs-dev pkg-config mandoc iproute2 clang systemd man-db \
	   python3 python3-numpy python3-torch python3-venv python3-pip \
	   python3-setuptools python3-wheel python3-dev libtorch-dev
PC_MODS	 = libevent libevent_pthreads jansson libsystemd check libsodium

# Messages are cut to fixed buffers on purpose: no -Wformat-truncation.
WARN	 = -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
	   -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral -Wvla \
	   -Wcast-qual -Wundef -Wno-format-truncation
OPT	?= -O2 -g
SAN	?=
# Hidden by default: libmccl exports what mccl.h declares, nothing else.
CFLAGS	+= -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(WARN) -fPIC \
	   -fvisibility=hidden -Iproto -Ilibclient -Idaemon
LDFLAGS	+= $(SAN)

PKG_CFLAGS = $(shell pkg-config --cflags $(PC_MODS) 2>/dev/null)
EVENT_LIBS = $(shell pkg-config --libs libevent libevent_pthreads 2>/dev/null)
JSON_LIBS  = $(shell pkg-config --libs jansson 2>/dev/null)
SD_LIBS    = $(shell pkg-config --libs libsystemd 2>/dev/null)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)
SODIUM_LIBS = $(shell pkg-config --libs libsodium 2>/dev/null)
CFLAGS	+= $(PKG_CFLAGS)

PROTO_SRCS  = proto/proto.c proto/spin.c
# The daemon, by layer: the process (mccld.c, config, log), the control
# plane (control/: clients, peers, jobs), the data plane (engine/: the
# engine, the algorithms, send/recv, reductions, segments) and the
# transports under it (transport/).
LINK_SRCS   = daemon/transport/tcp.c daemon/transport/linkerr.c
CORE_SRCS   = daemon/log.c daemon/config.c daemon/engine/reduce.c \
	      daemon/engine/ring.c daemon/engine/allreduce.c daemon/engine/duplex.c daemon/engine/crew.c daemon/engine/algo.c daemon/engine/bigmem.c $(LINK_SRCS)
CONTROL_SRCS = daemon/control/loop.c daemon/control/control.c \
	      daemon/control/command.c \
	      daemon/control/peer.c \
	      daemon/control/job.c daemon/control/form.c \
	      daemon/control/jobctl.c daemon/control/check.c \
	      daemon/control/counters.c daemon/control/metrics.c \
	      daemon/control/scrape.c \
	      daemon/control/linkcost.c \
	      daemon/control/liveness.c
ENGINE_SRCS = daemon/engine/engine.c daemon/engine/coll.c daemon/engine/local.c daemon/engine/pipeline.c daemon/engine/exchange.c daemon/engine/pass.c daemon/engine/subq.c daemon/engine/seg.c daemon/engine/xmem.c \
	      daemon/engine/p2p.c daemon/engine/budget.c daemon/engine/op.c \
	      daemon/engine/check.c
DAEMON_SRCS = daemon/mccld.c daemon/reload.c $(CONTROL_SRCS) $(ENGINE_SRCS) \
	      daemon/transport/link.c daemon/transport/rdma.c \
	      daemon/transport/dial.c daemon/transport/auth.c $(CORE_SRCS) \
	      $(PROTO_SRCS)
LIB_SRCS    = libclient/mccl.c libclient/conn.c $(PROTO_SRCS)
CTL_SRCS    = tools/mcclctl.c tools/output.c tools/clusterconf.c libclient/conn.c $(PROTO_SRCS)
PERF_SRCS   = tools/perf/main.c tools/perf/options.c tools/perf/measure.c \
	      tools/perf/colls.c tools/perf/pattern.c tools/perf/report.c

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

PROGS	 = $(B)/mccld $(B)/mcclctl $(B)/mccl-perf
LIBS	 = $(B)/$(SONAME) $(B)/libmccl.so $(B)/libmccl.a
UNIT_TESTS = $(B)/test_proto $(B)/test_reduce $(B)/test_config $(B)/test_ring \
	     $(B)/test_log $(B)/test_fakeverbs $(B)/test_rdma $(B)/test_budget \
	     $(B)/test_subq $(B)/test_algo $(B)/test_form $(B)/test_engine \
	     $(B)/test_crew $(B)/test_pass $(B)/test_conn $(B)/test_liveness \
	     $(B)/test_perf_pattern $(B)/test_check $(B)/test_metrics \
	     $(B)/test_command $(B)/test_scrape $(B)/test_peer \
	     $(B)/test_reload $(B)/test_ctlcheck
TEST_PROGS = $(B)/mccl-test $(B)/mccl-hostile
BENCH_PROGS = $(B)/wirebw $(B)/costmodel

# mccl.torch's backend in C++ (libclient/torch), built against the torch
# $(PYTHON) runs, beside the package's Python files.
PY_EXT	     = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
# Built by the default build only: the module is one file in the source
# tree, and a sanitizer's libmccl cannot load into an uninstrumented
# python3 (the test trees, build-rdma and the others, leave it alone).
TORCH_NATIVE = $(if $(and $(filter build,$(B)),$(if $(SAN),,x)),libclient/python/mccl/_native$(PY_EXT))
TORCH_SRCS   = $(wildcard libclient/torch/*.cpp libclient/torch/*.h) \
	       libclient/torch/build.py libclient/mccl.h

all: $(B)/.deps $(PROGS) $(LIBS) $(BENCH_PROGS) $(TORCH_NATIVE)

$(TORCH_NATIVE): $(TORCH_SRCS) $(B)/$(SONAME) | $(B)/.deps
	@echo "building the torch backend (libclient/torch)"
	@$(PYTHON) libclient/torch/build.py libclient/python/mccl
	@MCCL_LIBRARY=$(B)/$(SONAME) PYTHONPATH=libclient/python $(PYTHON) -c \
	    'from mccl import _lib; _lib.load(); from mccl import _native' || \
	    { rm -f $@; echo "the torch backend does not load"; exit 1; }

# Install missing Debian packages when root; otherwise say what to run.
$(B)/.deps:
	@mkdir -p $(B)
	@missing=""; \
	for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
		else \
			echo "missing packages; run as root:"; \
			echo "  apt-get install -y$$missing"; exit 1; \
		fi; \
	fi
	@touch $@

deps: $(B)/.deps

$(B)/obj/%.o: %.c $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)

# The daemon's verbs: libibverbs, or with VERBS=fake the tests' provider
# (tests/fakeverbs), which carries RDMA between daemons on one machine.
ifeq ($(VERBS),fake)
VERBS_OBJS = $(call obj,tests/fakeverbs/fakeverbs.c)
VERBS_LIBS =
else
VERBS_OBJS =
VERBS_LIBS = -libverbs
endif

$(B)/mccld: $(call obj,$(DAEMON_SRCS)) $(VERBS_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(JSON_LIBS) $(SD_LIBS) $(SODIUM_LIBS) $(VERBS_LIBS) -lpthread -lm

$(B)/$(SONAME): $(call obj,$(LIB_SRCS))
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) -o $@ $^ -lpthread

$(B)/libmccl.so: $(B)/$(SONAME)
	ln -sf $(SONAME) $@

# One object whose hidden symbols are made local: a program linked with
# libmccl.a sees mccl_* and nothing of the library's insides (conn_*,
# proto_*, wire_*), as with libmccl.so.
$(B)/libmccl.a: $(call obj,$(LIB_SRCS))
	rm -f $@
	$(CC) $(LDFLAGS) -r -nostdlib -o $(B)/obj/libmccl.o $^
	objcopy --localize-hidden $(B)/obj/libmccl.o
	ar rcs $@ $(B)/obj/libmccl.o

$(B)/mcclctl: $(call obj,$(CTL_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(JSON_LIBS)

$(B)/mccl-perf: $(call obj,$(PERF_SRCS)) $(B)/libmccl.a
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread -lm

# ---- tests ----

$(B)/test_proto: $(call obj,tests/unit/test_proto.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS)

$(B)/test_reduce: $(call obj,tests/unit/test_reduce.c daemon/engine/reduce.c daemon/log.c)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS)

$(B)/test_config: $(call obj,tests/unit/test_config.c daemon/config.c daemon/log.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(JSON_LIBS) $(CHECK_LIBS)

$(B)/test_log: $(call obj,tests/unit/test_log.c daemon/log.c)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS)

$(B)/test_ring: $(call obj,tests/unit/test_ring.c tests/unit/testlib.c daemon/engine/ring.c daemon/engine/bigmem.c daemon/engine/allreduce.c daemon/engine/duplex.c daemon/engine/crew.c daemon/engine/algo.c daemon/engine/reduce.c daemon/log.c $(LINK_SRCS) daemon/transport/rdma.c tests/fakeverbs/fakeverbs.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(SODIUM_LIBS) -lpthread

$(B)/test_subq: $(call obj,tests/unit/test_subq.c tests/unit/testlib.c daemon/engine/bigmem.c daemon/engine/subq.c daemon/engine/op.c daemon/engine/seg.c daemon/engine/xmem.c daemon/engine/ring.c daemon/engine/allreduce.c daemon/engine/duplex.c daemon/engine/crew.c daemon/engine/algo.c daemon/engine/reduce.c daemon/log.c $(LINK_SRCS) $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) -lpthread

$(B)/test_form: $(call obj,tests/unit/test_form.c tests/unit/ctltest.c daemon/control/loop.c daemon/control/form.c daemon/control/job.c daemon/control/jobctl.c daemon/control/linkcost.c daemon/engine/op.c daemon/engine/seg.c daemon/engine/xmem.c daemon/engine/algo.c daemon/engine/reduce.c daemon/config.c daemon/log.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(JSON_LIBS) $(CHECK_LIBS) -lpthread

$(B)/test_engine: $(call obj,tests/unit/test_engine.c tests/unit/testlib.c daemon/engine/engine.c daemon/engine/coll.c daemon/engine/local.c daemon/engine/pipeline.c daemon/engine/exchange.c daemon/engine/pass.c daemon/engine/subq.c daemon/engine/p2p.c daemon/engine/op.c daemon/engine/seg.c daemon/engine/xmem.c daemon/engine/budget.c $(CORE_SRCS) daemon/transport/link.c daemon/transport/dial.c daemon/transport/auth.c daemon/transport/rdma.c tests/fakeverbs/fakeverbs.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(JSON_LIBS) $(CHECK_LIBS) $(SODIUM_LIBS) -lpthread

$(B)/test_check: $(call obj,tests/unit/test_check.c tests/unit/testlib.c daemon/engine/check.c \
    daemon/transport/link.c daemon/transport/dial.c daemon/transport/auth.c \
    daemon/transport/rdma.c $(LINK_SRCS) daemon/log.c \
    tests/fakeverbs/fakeverbs.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(SODIUM_LIBS) -lpthread

$(B)/test_metrics: $(call obj,tests/unit/test_metrics.c tests/unit/testlib.c tests/unit/ctltest.c \
    daemon/control/loop.c daemon/control/counters.c \
    daemon/control/metrics.c daemon/engine/algo.c daemon/engine/budget.c \
    daemon/engine/bigmem.c daemon/log.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(JSON_LIBS) $(CHECK_LIBS) \
	    -lpthread

$(B)/test_command: $(call obj,tests/unit/test_command.c tests/unit/testlib.c \
    daemon/control/command.c daemon/log.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(JSON_LIBS) $(CHECK_LIBS)

$(B)/test_scrape: $(call obj,tests/unit/test_scrape.c tests/unit/testlib.c tests/unit/ctltest.c daemon/control/scrape.c \
    daemon/control/loop.c daemon/transport/auth.c daemon/transport/dial.c \
    daemon/log.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(JSON_LIBS) $(SODIUM_LIBS) \
	    $(CHECK_LIBS)

$(B)/test_peer: $(call obj,tests/unit/test_peer.c tests/unit/testlib.c tests/unit/ctltest.c daemon/control/peer.c \
    daemon/control/loop.c daemon/control/liveness.c daemon/transport/auth.c \
    daemon/transport/dial.c daemon/log.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(JSON_LIBS) $(SODIUM_LIBS) \
	    $(CHECK_LIBS)

$(B)/test_reload: $(call obj,tests/unit/test_reload.c tests/unit/testlib.c daemon/reload.c \
    daemon/config.c daemon/log.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(JSON_LIBS) $(CHECK_LIBS)

$(B)/test_ctlcheck: $(call obj,tests/unit/test_ctlcheck.c tests/unit/testlib.c tests/unit/ctltest.c \
    daemon/control/check.c daemon/control/loop.c daemon/log.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(JSON_LIBS) $(CHECK_LIBS)

$(B)/wirebw: $(call obj,tools/bench/wirebw.c daemon/engine/reduce.c daemon/log.c)
	$(CC) $(LDFLAGS) -o $@ $^

$(B)/costmodel: $(call obj,tools/bench/costmodel.c daemon/engine/algo.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^

$(B)/test_algo: $(call obj,tests/unit/test_algo.c daemon/engine/algo.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS)

$(B)/test_perf_pattern: $(call obj,tests/unit/test_perf_pattern.c tools/perf/pattern.c)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) -lm

$(B)/test_crew: $(call obj,tests/unit/test_crew.c daemon/engine/crew.c)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) -lpthread

$(B)/test_pass: $(call obj,tests/unit/test_pass.c daemon/engine/pass.c daemon/engine/xmem.c daemon/engine/crew.c daemon/engine/reduce.c daemon/log.c)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) -lpthread

$(B)/test_conn: $(call obj,tests/unit/test_conn.c libclient/conn.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS)

$(B)/test_liveness: $(call obj,tests/unit/test_liveness.c daemon/control/liveness.c)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS)

$(B)/test_budget: $(call obj,tests/unit/test_budget.c daemon/engine/budget.c daemon/engine/bigmem.c)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) -lpthread

# The verbs provider of the tests (tests/fakeverbs), in place of -libverbs.
$(B)/test_fakeverbs: $(call obj,tests/unit/test_fakeverbs.c tests/fakeverbs/fakeverbs.c)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) -lpthread

$(B)/test_rdma: $(call obj,tests/unit/test_rdma.c daemon/transport/rdma.c \
    daemon/transport/tcp.c daemon/transport/linkerr.c daemon/log.c \
    proto/proto.c tests/fakeverbs/fakeverbs.c)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(SODIUM_LIBS) -lpthread

$(B)/mccl-test: $(call obj,tests/integration/mccl-test.c) $(B)/libmccl.a
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread -lm

$(B)/mccl-hostile: $(call obj,tests/integration/hostile.c libclient/conn.c \
    daemon/transport/auth.c daemon/log.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(SODIUM_LIBS)

$(B)/notify-sink: $(call obj,tests/ops/notify-sink.c)
	$(CC) $(LDFLAGS) -o $@ $^

# Every program the tests run, built (make -j$(NPROC) test-progs: the
# test parts build their trees in parallel first, then run serially).
NPROC := $(shell nproc 2>/dev/null || echo 2)
test-progs: all $(TEST_PROGS) $(UNIT_TESTS) $(B)/notify-sink

unit: $(UNIT_TESTS)
	@for t in $(UNIT_TESTS); do echo "== $$t"; CK_DEFAULT_TIMEOUT=120 $$t || exit 1; done

integration: all $(TEST_PROGS)
	tests/integration/run.sh $(B) $(SECTIONS)

# The tests under the sanitizers; any report fails the run.  Both leave
# out the unit tests' cases tagged "matrix" (test_ring's: the same threads
# over more node counts and sizes), which check-rdma runs at full speed.
# ThreadSanitizer is slow: it runs the threaded parts (the ring engine,
# send/recv, the API tests with threads, the faults).
ASAN_FLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer \
	     -fno-sanitize-recover=all
TSAN_FLAGS = -fsanitize=thread
# A small quarantine: the daemon's memory-growth checks stay meaningful.
# Allocation stacks of 5 frames, not 30: every error is found as before,
# a report names where the memory was allocated and freed 5 calls deep;
# the integration suite's matrix section runs 0.92 of the time.
# The unit tests' deadlines stretched for the sanitizers' slowness
# (CK_TIMEOUT_MULTIPLIER, check's own): test_conn's 30 s document test
# takes 29-30 s under ASan alone on 2 cores.
ASAN_MAKE = $(MAKE) B=build-asan OPT="-O1 -g" SAN="$(ASAN_FLAGS)"
TSAN_MAKE = $(MAKE) B=build-tsan OPT="-O1 -g" SAN="$(TSAN_FLAGS)" \
	    UNIT_TESTS="build-tsan/test_ring build-tsan/test_fakeverbs \
	    build-tsan/test_rdma build-tsan/test_budget build-tsan/test_engine \
	    build-tsan/test_crew build-tsan/test_pass build-tsan/test_check"
check-asan:
	$(ASAN_MAKE) -j$(NPROC) test-progs
	ASAN_OPTIONS=quarantine_size_mb=4:malloc_context_size=5 \
	    CK_TIMEOUT_MULTIPLIER=4 CK_EXCLUDE_TAGS=matrix $(ASAN_MAKE) unit \
	    integration

check-tsan:
	$(TSAN_MAKE) -j$(NPROC) test-progs
	CK_TIMEOUT_MULTIPLIER=4 CK_EXCLUDE_TAGS=matrix $(TSAN_MAKE) \
	    SECTIONS="api faults" unit integration

# The integration sections whose data links differ by transport, with
# every data link over RDMA: the daemons run on the tests' verbs provider,
# their transport set to "rdma".  The default build's only integration
# run (the sanitizers' runs are on TCP): the memory checks that a
# sanitizer's allocator would defeat run here.  Not the hostile section,
# whose input reaches the sockets and the data links before their set-up,
# nor ctl, whose one look at the links' transport is transport.sh's: the
# same over either transport, ASan's run has them.  Also the unit tests'
# cases tagged "matrix" (test_ring: the same threads as its other cases
# over more node counts, algorithms and sizes, TCP and RDMA), whose worth
# is their results: here at full speed, not under the sanitizers.
RDMA_SECTIONS = matrix api check faults transport
check-rdma:
	$(MAKE) -j$(NPROC) B=build-rdma VERBS=fake test-progs
	CK_INCLUDE_TAGS=matrix $(MAKE) B=build-rdma VERBS=fake \
	    UNIT_TESTS=build-rdma/test_ring unit
	MCCL_TEST_TRANSPORT=rdma $(MAKE) B=build-rdma VERBS=fake \
	    SECTIONS="$(RDMA_SECTIONS)" integration

# The Python package as a wheel that carries libmccl.so.0 and mcclctl
# (libclient/python/setup.py), offline: $(B)/mccl-VERSION-*.whl.
wheel: all
	rm -f $(B)/mccl-*.whl
	$(PYTHON) -m pip wheel --quiet --no-deps --no-build-isolation \
	    --no-index -w $(B) ./libclient/python

# The Python package, the torch backend and mcclrun (tests/python).
check-python: all
	tests/python/run.sh $(B)

# PyTorch's whole distributed suite at world sizes 2 and 4: every test
# that passes on gloo must pass on mccl (hours; make check runs a part).
check-torch-suite: all
	tests/python/suite_compare.sh $(B)

# The soak (tests/soak/soak.sh): three users' verified jobs on three
# daemons under rank and daemon faults; `make soak` runs it for
# SOAK_SECONDS, make check for 45.
SOAK_SECONDS ?= 600
soak: all $(TEST_PROGS)
	tests/soak/soak.sh $(B) $(SOAK_SECONDS)

check-soak: all $(TEST_PROGS)
	tests/soak/soak.sh $(B) 45

# Every part, then one grand total (tests/check.sh), CHECK_JOBS parts at
# once, the longest first: two (23 minutes on 2 cores against about 45
# one at a time; the suites mostly wait).  Each suite runs once per
# configuration that finds different bugs: the unit tests and the whole
# integration suite under ASan (not plain as well), TSan on the threaded
# parts, the transport-dependent sections over emulated RDMA and the
# matrix of unit cases on the optimised build.
CHECK_JOBS ?= 2
CHECK_PARTS = check-asan check-tsan check-rdma check-python check-ops \
	check-soak fuzz fuzz-regress

check: $(B)/.deps
	$(MAKE) -j$(NPROC) test-progs
	MAKE="$(MAKE) -f $(firstword $(MAKEFILE_LIST))" \
	    tests/check.sh -j $(CHECK_JOBS) $(CHECK_PARTS)

demo: all
	tools/demo.sh $(B)

# Benchmark against Open MPI and Gloo (cases 1-3 need root); not part of
# check.  BENCH_ARGS: cases and options of tools/bench/bench.sh, e.g. "-q 4 5".
bench: all
	tools/bench/bench.sh -B $(B) $(BENCH_ARGS)


# ---- fuzzing: tests/fuzz/README ----

FUZZ_SECONDS	?= 10
FUZZ_LONG	?= 600
FUZZ_TARGETS	 = fuzz_ipc fuzz_peer fuzz_config
FUZZ_REGRESS	 = $(addprefix $(B)/fuzz-regress/,$(FUZZ_TARGETS))

# libFuzzer with ASan and UBSan (clang): a short run for `make check`, a
# long one on demand (make fuzz-long FUZZ_LONG=3600).
fuzz:
	tests/fuzz/run.sh $(FUZZ_SECONDS) $(B)

fuzz-long:
	tests/fuzz/run.sh $(FUZZ_LONG) $(B)

# The same targets with standalone.c instead of libFuzzer, built by $(CC):
# replay the seed corpora.
$(B)/fuzz-regress/fuzz_ipc: $(call obj,tests/fuzz/fuzz_ipc.c \
    tests/fuzz/fuzz_wire.c tests/fuzz/standalone.c $(PROTO_SRCS))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

$(B)/fuzz-regress/fuzz_peer: $(call obj,tests/fuzz/fuzz_peer.c \
    tests/fuzz/fuzz_wire.c tests/fuzz/standalone.c $(PROTO_SRCS))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

$(B)/fuzz-regress/fuzz_config: $(call obj,tests/fuzz/fuzz_config.c \
    tests/fuzz/standalone.c daemon/config.c daemon/log.c $(PROTO_SRCS))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(JSON_LIBS)

fuzz-regress: $(FUZZ_REGRESS)
	@for t in $(FUZZ_TARGETS); do \
		$(B)/fuzz-regress/$$t tests/fuzz/corpus/$${t#fuzz_} || exit 1; \
	done

# Rewrite the ipc and peer seeds after a message layout changes.
$(B)/gen_seeds: $(call obj,tests/fuzz/gen_seeds.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^

fuzz-seeds: $(B)/gen_seeds
	$(B)/gen_seeds tests/fuzz/corpus

.PHONY: fuzz fuzz-long fuzz-regress fuzz-seeds

# ---- install ----

SYSCONFDIR  = /etc
DOCDIR	    = $(PREFIX)/share/doc/mccl
PCDIR	    = $(LIBDIR)/pkgconfig
UNITDIR	    = $(PREFIX)/lib/systemd/system
# Where Debian's python3 looks for packages under PREFIX.
PYVER	    = $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYDIR	    = $(PREFIX)/lib/python$(PYVER)/dist-packages
PYFILES	    = $(wildcard libclient/python/mccl/*.py)	# every module
SYSUSERSDIR = $(PREFIX)/lib/sysusers.d
MAN1	    = man/mccl-perf.1 man/mcclrun.1
MAN3	    = man/libmccl.3 man/mccl-python.3
MAN5	    = man/mccld.conf.5
MAN8	    = man/mccld.8 man/mcclctl.8
MANPAGES    = $(MAN1) $(MAN3) $(MAN5) $(MAN8)
# `man mccl_allreduce` and so on open libmccl(3): every function mccl.h
# declares (tests/ops/manpages.sh checks libmccl(3) names each).
PAREN	   := (
MAN3_LINKS  = $(shell grep -oE '\bmccl_[a-z0-9_]+[$(PAREN)]' libclient/mccl.h | \
	      tr -d '$(PAREN)' | sort -u)

# Files that embed PREFIX are remade when it changes.
$(B)/.prefix: FORCE
	@mkdir -p $(B)
	@echo '$(PREFIX)' | cmp -s - $@ || echo '$(PREFIX)' >$@

$(B)/mccl.pc: libclient/mccl.pc.in $(B)/.prefix
	sed -e 's#@PREFIX@#$(PREFIX)#g' -e 's#@LIBDIR@#$(LIBDIR)#g' \
	    -e 's#@INCDIR@#$(INCDIR)#g' -e 's#@VERSION@#$(LIBVER)#g' \
	    libclient/mccl.pc.in >$@

$(B)/mccld.service: config/mccld.service $(B)/.prefix
	sed 's#/usr/local/sbin/#$(SBINDIR)/#g' config/mccld.service >$@

install: all $(B)/mccl.pc $(B)/mccld.service
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) \
	    $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PCDIR) $(DESTDIR)$(INCDIR) \
	    $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 \
	    $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
	    $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
	    $(DESTDIR)$(DOCDIR) $(DESTDIR)$(SYSCONFDIR)/mccl \
	    $(DESTDIR)$(PYDIR)/mccl $(DESTDIR)$(DOCDIR)/examples
	install -m 0755 $(B)/mccld $(DESTDIR)$(SBINDIR)/mccld
	install -m 0755 $(B)/mcclctl $(B)/mccl-perf tools/mcclrun \
	    $(DESTDIR)$(BINDIR)/
	install -m 0644 $(PYFILES) $(DESTDIR)$(PYDIR)/mccl/
	install -m 0644 libclient/python/examples/allreduce.py \
	    libclient/python/examples/ddp.py $(DESTDIR)$(DOCDIR)/examples/
	install -m 0755 $(B)/$(SONAME) $(DESTDIR)$(LIBDIR)/libmccl.so.$(LIBVER)
	ln -sf libmccl.so.$(LIBVER) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libmccl.so
	install -m 0644 $(B)/libmccl.a $(DESTDIR)$(LIBDIR)/libmccl.a
	install -m 0644 libclient/mccl.h $(DESTDIR)$(INCDIR)/mccl.h
	install -m 0644 $(B)/mccl.pc $(DESTDIR)$(PCDIR)/mccl.pc
	install -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(MAN3) $(DESTDIR)$(MANDIR)/man3/
	install -m 0644 $(MAN5) $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 $(MAN8) $(DESTDIR)$(MANDIR)/man8/
	for f in $(MAN3_LINKS); do \
		ln -sf libmccl.3 $(DESTDIR)$(MANDIR)/man3/$$f.3 || exit 1; \
	done
	install -m 0644 $(B)/mccld.service config/mccld.socket \
	    $(DESTDIR)$(UNITDIR)/
	install -m 0644 config/mccl.sysusers $(DESTDIR)$(SYSUSERSDIR)/mccl.conf
	install -m 0644 config/mccld.conf.example config/mccld.conf.keys \
	    $(DESTDIR)$(DOCDIR)/
	install -m 0644 config/mccld.conf.example \
	    $(DESTDIR)$(SYSCONFDIR)/mccl/mccld.conf.example
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
		ldconfig; \
		echo "next: systemd-sysusers; cp $(SYSCONFDIR)/mccl/mccld.conf.example" \
		    "$(SYSCONFDIR)/mccl/mccld.conf and edit it;" \
		    "systemctl daemon-reload; systemctl enable --now mccld.socket mccld.service"; \
	fi

# Units, man pages and `make install`, checked without touching the system.
check-ops: all $(B)/notify-sink $(TEST_PROGS)
	tests/ops/verify-units.sh $(B)
	tests/ops/notify-test.sh $(B)
	tests/ops/private-build.sh $(B)
	tests/ops/exports.sh $(B)
	tests/ops/settings.sh $(B)
	tests/ops/layers.sh $(B)
	tests/ops/manpages.sh
	tests/ops/help.sh $(B)
	tests/ops/readme.sh $(B)
	@out=$$(mandoc -T lint -W warning $(MANPAGES) 2>&1); \
	if [ -n "$$out" ]; then echo "$$out"; echo "FAIL mandoc lint"; exit 1; fi; \
	echo "ok   mandoc -T lint -W warning $(MANPAGES)"
	MAKE="$(MAKE) -f $(firstword $(MAKEFILE_LIST))" tests/ops/install-test.sh $(B)

FORCE:

.PHONY: install check-ops FORCE

clean:
	rm -rf $(B) build-asan build-tsan build-rdma

.PHONY: all deps unit integration check check-asan check-tsan check-rdma check-python \
	check-soak check-torch-suite soak wheel demo bench clean test-progs

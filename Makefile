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
SONAME	 = libmccl.so.0
LIBVER	 = 0.1.0

# Debian packages the build and the tests need: pkg-config module or
# command -> package.
DEB_PKGS = libevent-dev libjansson-dev libsystemd-dev check libsodium-dev \
	   libibverbs-dev pkg-config mandoc iproute2
PC_MODS	 = libevent libevent_pthreads jansson libsystemd check libsodium

# Messages are cut to fixed buffers on purpose: no -Wformat-truncation.
WARN	 = -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
	   -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral -Wvla \
	   -Wcast-qual -Wundef -Wno-format-truncation
OPT	?= -O2 -g
SAN	?=
CFLAGS	+= -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(WARN) -fPIC \
	   -Iproto -Ilibclient -Idaemon
LDFLAGS	+= $(SAN)

PKG_CFLAGS = $(shell pkg-config --cflags $(PC_MODS) 2>/dev/null)
EVENT_LIBS = $(shell pkg-config --libs libevent libevent_pthreads 2>/dev/null)
JSON_LIBS  = $(shell pkg-config --libs jansson 2>/dev/null)
SD_LIBS    = $(shell pkg-config --libs libsystemd 2>/dev/null)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)
SODIUM_LIBS = $(shell pkg-config --libs libsodium 2>/dev/null)
CFLAGS	+= $(PKG_CFLAGS)

PROTO_SRCS  = proto/proto.c
CORE_SRCS   = daemon/log.c daemon/config.c daemon/reduce.c daemon/ring.c
DAEMON_SRCS = daemon/mccld.c daemon/control.c daemon/peer.c daemon/job.c daemon/p2p.c \
	      daemon/engine.c daemon/auth.c $(CORE_SRCS) $(PROTO_SRCS)
LIB_SRCS    = libclient/mccl.c libclient/conn.c $(PROTO_SRCS)
CTL_SRCS    = tools/mcclctl.c tools/output.c libclient/conn.c $(PROTO_SRCS)
PERF_SRCS   = tools/mccl-perf.c

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

PROGS	 = $(B)/mccld $(B)/mcclctl $(B)/mccl-perf
LIBS	 = $(B)/$(SONAME) $(B)/libmccl.so $(B)/libmccl.a
UNIT_TESTS = $(B)/test_proto $(B)/test_reduce $(B)/test_config $(B)/test_ring
TEST_PROGS = $(B)/mccl-test $(B)/mccl-hostile

all: $(B)/.deps $(PROGS) $(LIBS)

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

$(B)/mccld: $(call obj,$(DAEMON_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(JSON_LIBS) $(SD_LIBS) $(SODIUM_LIBS) -lpthread -lm

$(B)/$(SONAME): $(call obj,$(LIB_SRCS))
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) -o $@ $^ -lpthread

$(B)/libmccl.so: $(B)/$(SONAME)
	ln -sf $(SONAME) $@

$(B)/libmccl.a: $(call obj,$(LIB_SRCS))
	rm -f $@
	ar rcs $@ $^

$(B)/mcclctl: $(call obj,$(CTL_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(JSON_LIBS)

$(B)/mccl-perf: $(call obj,$(PERF_SRCS)) $(B)/libmccl.a
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread -lm

# ---- tests ----

$(B)/test_proto: $(call obj,tests/unit/test_proto.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS)

$(B)/test_reduce: $(call obj,tests/unit/test_reduce.c daemon/reduce.c daemon/log.c)
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS)

$(B)/test_config: $(call obj,tests/unit/test_config.c daemon/config.c daemon/log.c)
	$(CC) $(LDFLAGS) -o $@ $^ $(JSON_LIBS) $(CHECK_LIBS)

$(B)/test_ring: $(call obj,tests/unit/test_ring.c daemon/ring.c daemon/reduce.c daemon/log.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) -lpthread

$(B)/mccl-test: $(call obj,tests/integration/mccl-test.c) $(B)/libmccl.a
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread -lm

$(B)/mccl-hostile: $(call obj,tests/integration/hostile.c libclient/conn.c $(PROTO_SRCS))
	$(CC) $(LDFLAGS) -o $@ $^

unit: $(UNIT_TESTS)
	@for t in $(UNIT_TESTS); do echo "== $$t"; CK_DEFAULT_TIMEOUT=120 $$t || exit 1; done

integration: all $(TEST_PROGS)
	tests/integration/run.sh $(B)

check: all unit integration

demo: all
	tools/demo.sh $(B)

clean:
	rm -rf $(B)

.PHONY: all deps unit integration check demo clean

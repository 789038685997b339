# tokentap: plain make, pkg-config, objects in build/.
#   make                 build the three programs
#   make test            unit + end-to-end tests, normal and under ASan+UBSan
#   make demo            bundled backend, proxy, a short load, the stats table
#   make SANITIZER=address,undefined   instrumented build (objects in build/san)
#   make DEPS=no         never run apt-get (the packages are yours to install)

VERSION   := 0.1.0
PREFIX    ?= /usr/local
DESTDIR   ?=
SANITIZER ?=
CC        ?= cc
DEPS      ?= install

PKGS      := libevent libevent_openssl libevent_pthreads openssl yaml-0.1
LLHTTP    := /usr/share/llhttp
LLHTTP_H  := /usr/share/include/llhttp
# llhttp's strict mode: no lenient parsing of whitespace, line ends, URL
# characters or chunk framing (tests/conformance holds what it refuses)
LLHTTP_STRICT := -DLLHTTP_STRICT_MODE=1

ifeq ($(SANITIZER),)
B := build
else
B := build/san
SANFLAGS := -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
WARN     := -Wall -Wextra -Werror -Wshadow -Wformat=2
XCFLAGS   = -std=c11 -D_GNU_SOURCE -DTOKENTAP_VERSION='"$(VERSION)"' -Isrc -I$(LLHTTP_H) $(LLHTTP_STRICT) \
            $(PKG_CFLAGS) -MMD -MP $(SANFLAGS)
LIBS      = $(PKG_LIBS) -lpthread -lm

# ---- Packages ---------------------------------------------------------------
# The rules below look for files the packages bring (pkg-config's flags,
# /usr/share/llhttp/*.c), so the packages must be there before make reads
# them. build/config.mk is an included makefile that make knows how to
# remake: its recipe installs tests/deps/build.list and records pkg-config's
# flags; make then starts over and reads everything with the packages in
# place. The tests' packages (tests/deps/test.list) are a prerequisite of the
# targets that need them; nothing is evaluated from them. A goal that needs
# no package (clean, the container checks) reads no config and installs
# nothing.
.DEFAULT_GOAL := all
CONFIG     := build/config.mk
TEST_DEPS  := build/deps-test.stamp
NOPKG_GOALS := clean uninstall test-docker test-fresh
ifeq ($(MAKECMDGOALS),)
include $(CONFIG)
else ifneq ($(filter-out $(NOPKG_GOALS),$(MAKECMDGOALS)),)
include $(CONFIG)
endif

# DEPS=no: no apt-get, and no need for tests/ (the Docker build copies src/ only)
DEPS_SH    := $(if $(filter no,$(DEPS)),,tests/deps.sh)

$(CONFIG): $(if $(DEPS_SH),tests/deps/build.list $(DEPS_SH))
	@$(if $(DEPS_SH),sh $(DEPS_SH) tests/deps/build.list,:)
	@mkdir -p $(@D)
	@test -f $(LLHTTP)/llhttp.c || { echo "no $(LLHTTP)/llhttp.c: install node-llhttp" >&2; exit 1; }
	@cflags=$$(pkg-config --cflags $(PKGS)) && libs=$$(pkg-config --libs $(PKGS)) && \
	    printf '# written by make from pkg-config (%s)\nPKG_CFLAGS := %s\nPKG_LIBS := %s\n' \
	    '$(PKGS)' "$$cflags" "$$libs" >$@.tmp && mv $@.tmp $@

$(TEST_DEPS): $(if $(DEPS_SH),tests/deps/build.list tests/deps/test.list $(DEPS_SH))
	@$(if $(DEPS_SH),sh $(DEPS_SH) tests/deps/build.list tests/deps/test.list,:)
	@mkdir -p $(@D) && touch $@

# Every src/*.c is a module of the shared library of objects, except the
# three programs' own entry files.
MAINS     := src/main.c $(wildcard src/mock*.c) $(wildcard src/load*.c)
MOD_SRCS  := $(filter-out $(MAINS),$(wildcard src/*.c))
MOD_OBJS  := $(MOD_SRCS:src/%.c=$(B)/obj/%.o)
LL_OBJS   := $(B)/llhttp/llhttp.o $(B)/llhttp/api.o $(B)/llhttp/http.o
MOCK_OBJS := $(patsubst src/%.c,$(B)/obj/%.o,$(wildcard src/mock*.c))
LOAD_OBJS := $(patsubst src/%.c,$(B)/obj/%.o,$(wildcard src/load*.c))
BINS      := $(B)/tokentap $(B)/tokentap-mock $(B)/tokentap-load

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(B)/tests/%)

.PHONY: all deps test test-unit test-e2e demo bench fuzz clean
all: $(BINS)

# every package, the tests' too
deps: $(TEST_DEPS)

$(B)/obj/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(XCFLAGS) $(CFLAGS) $(WARN) -c -o $@ $<

# llhttp's C sources come from Debian's node-llhttp; compiled, never copied.
# (the Makefile holds its flags: strict mode)
$(B)/llhttp/%.o: $(LLHTTP)/%.c Makefile
	@mkdir -p $(@D)
	$(CC) -std=c11 -I$(LLHTTP_H) $(LLHTTP_STRICT) $(CFLAGS) $(SANFLAGS) -MMD -MP -w -c -o $@ $<

# the dashboard page is embedded with .incbin, which -MMD does not see
$(B)/obj/ui.o: src/ui/index.html

$(B)/tokentap: $(B)/obj/main.o $(MOD_OBJS) $(LL_OBJS)
	$(CC) $(SANFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS)

$(B)/tokentap-mock: $(MOCK_OBJS) $(MOD_OBJS) $(LL_OBJS)
	$(CC) $(SANFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS)

$(B)/tokentap-load: $(LOAD_OBJS) $(MOD_OBJS) $(LL_OBJS)
	$(CC) $(SANFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS)

# A unit test links its module's object (test_sse -> sse.o) plus the few
# modules listed for it below, so one module's tests build while another
# module is being changed.
COMMON := $(B)/obj/util.o $(B)/obj/log.o
CONF_OBJS := $(patsubst src/%.c,$(B)/obj/%.o,$(wildcard src/config*.c))
$(B)/tests/test_%: tests/unit/test_%.c $(B)/obj/%.o $(COMMON)
	@mkdir -p $(@D)
	$(CC) $(XCFLAGS) $(CFLAGS) $(WARN) -Itests/unit -o $@ $(filter %.c %.o,$^) $(LIBS) -lcmocka

$(UNIT_BINS): | $(TEST_DEPS)
$(B)/tests/test_dialect: $(B)/obj/sse.o $(B)/obj/json.o
$(B)/tests/test_stats:   $(B)/obj/hist.o $(B)/obj/stats_out.o $(B)/obj/promtext.o $(B)/obj/meter.o $(B)/obj/sse.o $(B)/obj/dialect.o $(B)/obj/json.o $(CONF_OBJS)
$(B)/tests/test_alert:   $(B)/obj/alert_format.o $(B)/obj/promtext.o $(CONF_OBJS)
$(B)/tests/test_meter:   $(B)/obj/sse.o $(B)/obj/dialect.o $(B)/obj/json.o
$(B)/tests/test_loadstats: $(B)/obj/hist.o $(B)/obj/meter.o $(B)/obj/sse.o $(B)/obj/dialect.o $(B)/obj/json.o $(B)/obj/load_scen.o $(B)/obj/load_conf.o $(B)/obj/load_body.o
$(B)/tests/test_route:   $(B)/obj/httphead.o $(CONF_OBJS)
$(B)/tests/test_httpcheck: $(B)/obj/httphead.o $(B)/obj/route.o $(CONF_OBJS)
$(B)/tests/test_config:  $(CONF_OBJS)

test-unit: $(TEST_DEPS) $(UNIT_BINS)
test: $(TEST_DEPS)
	@python3 tests/run.py

demo: all
	@sh tests/demo.sh

bench: $(TEST_DEPS) all
	@python3 tests/bench/bench.py

fuzz: $(TEST_DEPS)
	@sh tests/fuzz/run.sh

# install, test-docker and the packaging targets live in mk/
-include mk/*.mk

# Never into a file system mounted under build/ (make test-fresh's root
# has the host's /dev, /proc and /sys while it runs).
clean:
	@! awk '{ print $$2 }' /proc/self/mounts | grep -q '^$(CURDIR)/build/' || \
	    { echo "clean: a file system is mounted under build/ (make test-fresh running?)" >&2; exit 1; }
	rm -rf --one-file-system build

# this build's own dependency files only: build/ also holds other trees
# (the fresh Debian root of make test-fresh, the fuzzer, npm's modules)
-include $(wildcard $(B)/obj/*.d $(B)/llhttp/*.d $(B)/tests/*.d)

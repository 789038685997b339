# SPDX-License-Identifier: Apache-2.0
# tokentap: plain make, pkg-config, objects in build/.
#   make                 build the three programs
#   make test            unit + end-to-end tests, normal and under ASan+UBSan
#   make demo            bundled backend, proxy, a short load, the stats table
#   make SANITIZER=address,undefined   instrumented build (objects in build/san)
#   make LTO= OPT=-O2    no link-time optimisation, -O2: a quicker build
#   make DEPS=no         never run apt-get (the packages are yours to install)

VERSION   := 0.1.0
PREFIX    ?= /usr/local
DESTDIR   ?=
SANITIZER ?=
CC        ?= cc
DEPS      ?= install

PKGS      := libevent libevent_openssl libevent_pthreads openssl yaml-0.1 zlib \
             libbrotlidec libzstd
LLHTTP    := /usr/share/llhttp
LLHTTP_H  := /usr/share/include/llhttp
# llhttp's strict mode: no lenient parsing of whitespace, line ends, URL
# characters or chunk framing (tests/conformance holds what it refuses)
LLHTTP_STRICT := -DLLHTTP_STRICT_MODE=1

ifeq ($(SANITIZER),)
B := build
else ifneq ($(findstring fuzzer,$(SANITIZER)),)
B := build/fuzz
SANFLAGS := -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all
else
B := build/san
SANFLAGS := -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

# -O3 in the plain build: 1.6 % fewer instructions an event than -O2 with
# LTO (docs/benchmarks.md, "The build"); the instrumented builds stay at -O2
ifeq ($(SANITIZER),)
OPT      ?= -O3
endif
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
# Link-time optimisation in the plain build: the programs' code is made at
# the link, which inlines across files (one event runs through sse.c,
# dialect.c, meter.c and conn/; docs/benchmarks.md, "The build"). The
# sanitizer and fuzz builds keep their flags; make LTO= turns it off.
ifeq ($(SANITIZER),)
LTO      ?= -flto=auto
# calls into libc, libevent and OpenSSL through the GOT, without the PLT's
# jump: some 21 calls an event, an instruction each (docs/benchmarks.md)
NOPLT    ?= -fno-plt
endif
# an archive of LTO objects needs the compiler's plugin for its index
AR       := $(if $(LTO),gcc-ar,$(AR))
# fat objects: the unit tests link their machine code (-fno-lto), 67 links
# that would each be a link-time compile otherwise (a minute of make test)
LTO_OBJ  := $(LTO) $(if $(LTO),-ffat-lto-objects)
# -Werror where the code is ours to fix (make test, make check, CI:
# WERROR=-Werror); a plain make leaves warnings warnings, so that a newer
# compiler's new warning never breaks a user's build
WERROR   ?=
WARN     := -Wall -Wextra $(WERROR) -Wshadow -Wformat=2
XCFLAGS   = -std=c11 -D_GNU_SOURCE -DTOKENTAP_VERSION='"$(VERSION)"' -I$(LLHTTP_H) $(LLHTTP_STRICT) \
            $(PKG_CFLAGS) -MMD -MP $(SANFLAGS) $(NOPLT)
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
NOPKG_GOALS := clean uninstall test-docker test-fresh print-%
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

# ---- The house -------------------------------------------------------------
# src/core/ is what the three programs share (the measurement definitions
# that make tokentap-load agree with tokentap, and the helpers); src/proxy/,
# src/mock/ and src/load/ are the programs. Each folder compiles with its
# own include path, the core's and its own, so a file that reaches into
# another program's folder does not build. The core and llhttp are an
# archive (build/libtokentap.a): a program links only the objects it uses.
DIRS       := core proxy mock load
# tokentap's folders are its two thread planes and what they stand on
# (docs/architecture.md, "Layout"): conf/ and wire/ below both; conn/, the
# worker threads; stats/, export/, alerts/, pool/ and otel/, the main thread's;
# the program shell
# (main, admin, ui) at the root. A plane's include path leaves the other
# plane out, so a worker-side file that includes a main-thread header does
# not build (tests/e2e/test_house.py keeps the rule).
P          := src/proxy
PROXY_DIRS := conf wire conn stats export alerts pool otel
INC_core   := -Isrc/core
INC_proxy_conf   := -Isrc/core -I$(P)/conf
INC_proxy_wire   := $(INC_proxy_conf) -I$(P)/wire
INC_proxy_conn   := $(INC_proxy_wire) -I$(P)/conn
MAIN_PLANE       := $(INC_proxy_wire) -I$(P)/stats -I$(P)/export -I$(P)/alerts -I$(P)/pool -I$(P)/otel
INC_proxy_stats  := $(MAIN_PLANE)
INC_proxy_export := $(MAIN_PLANE)
INC_proxy_alerts := $(MAIN_PLANE)
INC_proxy_pool   := $(MAIN_PLANE)
INC_proxy_otel   := $(MAIN_PLANE)
INC_proxy  := $(MAIN_PLANE) -I$(P)/conn -I$(P)
INC_mock   := -Isrc/core -Isrc/mock
# tokentap-load's folders by role (docs/architecture.md, "Layout"): conf/,
# what to send (the parameters, prompts, traces); stats/, the figures (the
# samples, the
# exact summary, the SLO, the bootstrap, the results); above both run/, the
# engine (connections, levels, searches, tokentap's /stats) and report/,
# what is written and read back (the table, JSON, CSV, HTML, compare),
# which do not see each other; the shell (main, scenarios) at the root.
L          := src/load
LOAD_DIRS  := conf stats run report
INC_load_conf   := -Isrc/core -I$(L)/conf
INC_load_stats  := $(INC_load_conf) -I$(L)/stats
INC_load_run    := $(INC_load_stats) -I$(L)/run
INC_load_report := $(INC_load_stats) -I$(L)/report
INC_load   := $(INC_load_stats) -I$(L)/run -I$(L)/report -I$(L)
# a source's include path is its folder's: src/proxy/conn/x.c -> INC_proxy_conn
inc_of     = $(INC_$(subst /,_,$(patsubst %/,%,$(dir $(1)))))
SRC_DIRS   := core $(P:src/%=%) $(PROXY_DIRS:%=proxy/%) mock load $(LOAD_DIRS:%=load/%)
SUBDIRS_proxy := $(PROXY_DIRS)
SUBDIRS_load  := $(LOAD_DIRS)
$(foreach d,$(DIRS),$(eval OBJS_$(d) := $(patsubst src/%.c,$(B)/obj/%.o,$(wildcard src/$(d)/*.c $(SUBDIRS_$(d):%=src/$(d)/%/*.c)))))
LL_OBJS    := $(B)/llhttp/llhttp.o $(B)/llhttp/api.o $(B)/llhttp/http.o
CORE_LIB   := $(B)/libtokentap.a
# a program's own objects but its entry file, for its unit tests
MAIN_proxy := $(B)/obj/proxy/main.o
MAIN_mock  := $(B)/obj/mock/mock.o
MAIN_load  := $(B)/obj/load/load.o
$(foreach d,proxy mock load,$(eval LIB_$(d) := $(B)/lib$(d).a))
BINS       := $(B)/tokentap $(B)/tokentap-mock $(B)/tokentap-load

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(B)/tests/%)

.PHONY: all deps test check test-unit test-e2e demo bench fuzz fuzz-load clean
all: $(BINS)

# every package, the tests' too
deps: $(TEST_DEPS)

# Objects are built anew when WERROR, LTO, NOPLT or OPT changes (a plain
# make after make test)
WERROR_STAMP := $(B)/werror.stamp
$(WERROR_STAMP): FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = "$(WERROR) $(LTO) $(NOPLT) $(OPT)" ] || echo "$(WERROR) $(LTO) $(NOPLT) $(OPT)" >$@
.PHONY: FORCE
FORCE:

# the folder of an object decides its include path: build/obj/proxy/conn/x.o
$(B)/obj/%.o: src/%.c $(WERROR_STAMP)
	@mkdir -p $(@D)
	$(CC) $(XCFLAGS) $(LTO_OBJ) $(call inc_of,$*) $(CFLAGS) $(WARN) -c -o $@ $<

# llhttp's C sources come from Debian's node-llhttp; compiled, never copied.
# (the Makefile holds its flags: strict mode)
$(B)/llhttp/%.o: $(LLHTTP)/%.c Makefile
	@mkdir -p $(@D)
	$(CC) -std=c11 -I$(LLHTTP_H) $(LLHTTP_STRICT) $(CFLAGS) $(SANFLAGS) $(NOPLT) $(LTO_OBJ) -MMD -MP -w -c -o $@ $<

# the dashboard page is embedded with .incbin, which -MMD does not see
$(B)/obj/proxy/ui.o: src/proxy/ui/index.html

$(CORE_LIB): $(OBJS_core) $(LL_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

.SECONDEXPANSION:
$(B)/lib%.a: $$(filter-out $$(MAIN_$$*),$$(OBJS_$$*))
	@rm -f $@
	$(AR) rcs $@ $^

# --as-needed: each program depends on the libraries it calls, no more.
# With LTO the code is generated here: the compile's flags and warnings
# (-Werror included) apply to it.
LINK = $(CC) $(SANFLAGS) $(LTO) $(if $(LTO),$(CFLAGS) $(NOPLT) $(WARN)) $(LDFLAGS) -Wl,--as-needed -o $@ $^ $(LIBS)

$(B)/tokentap: $(OBJS_proxy) $(CORE_LIB)
	$(LINK)

$(B)/tokentap-mock: $(OBJS_mock) $(CORE_LIB)
	$(LINK)

$(B)/tokentap-load: $(OBJS_load) $(CORE_LIB)
	$(LINK)

# A unit test's own source compiles at -O2 even in the -O3 build: there
# gcc 12 takes open_memstream's buffer, which the tests read their output
# from, for a pointer to the local that holds it (-Wdangling-pointer).
# A unit test is named for its module (test_sse: src/core/sse.c) and links
# that module's folder (as an archive, its entry file left out) and the
# core; it compiles with that folder's include path and tests/unit (a load
# test with the program's: test_loadstats builds requests and scenarios).
test_dir = $(firstword $(foreach d,$(SRC_DIRS),$(if $(wildcard src/$(d)/$(1).c),$(d))))
test_inc = $(if $(filter load/%,$(1)),$(INC_load),$(call inc_of,$(1)/x))
define unit_test
$(B)/tests/test_$(1): tests/unit/test_$(1).c $(LIB_$(firstword $(subst /, ,$(call test_dir,$(1))))) $(CORE_LIB) | $(TEST_DEPS)
	@mkdir -p $$(@D)
	$$(CC) $$(XCFLAGS) $$(if $$(LTO),-fno-lto) $(call test_inc,$(call test_dir,$(1))) -Itests/unit $$(CFLAGS:-O3=-O2) $$(WARN) \
	    -o $$@ $$(filter %.c %.a,$$^) $$(LIBS) -lcmocka
endef
$(foreach t,$(UNIT_SRCS:tests/unit/test_%.c=%),$(eval $(call unit_test,$(t))))

# The stream fuzzer (make fuzz, tests/fuzz/run.sh): the same rules with
# clang and SANITIZER=fuzzer-no-link,address,undefined (objects in
# build/fuzz), the harness linked with libFuzzer's main.
$(B)/fuzz_stream: tests/fuzz/fuzz_stream.c $(CORE_LIB)
	$(CC) $(XCFLAGS) $(INC_core) $(CFLAGS) -fsanitize=fuzzer,address,undefined \
	    -fno-sanitize-recover=all -o $@ $^ $(LIBS)

# tokentap-load's saved documents (load_read, the reports, compare):
# tests/fuzz/run.sh SECONDS load_read, make fuzz-load
$(B)/fuzz_load_read: tests/fuzz/fuzz_load_read.c $(LIB_load) $(CORE_LIB)
	$(CC) $(XCFLAGS) $(INC_load) $(CFLAGS) -fsanitize=fuzzer,address,undefined \
	    -fno-sanitize-recover=all -o $@ $^ $(LIBS)

test-unit: $(TEST_DEPS) $(UNIT_BINS)
test: $(TEST_DEPS)
	@python3 tests/run.py

# the middle tier: unit tests and the plain e2e tests without the bench,
# the browser, the demo and valgrind (tests/run.py --check)
check: $(TEST_DEPS)
	@python3 tests/run.py --check

demo: all
	@sh tests/demo.sh

# the bench's floor: a bare relay, no part of the product
$(B)/bench-relay: tests/bench/relay.c
	$(CC) -std=c11 -O2 $(WARN) -pthread -o $@ $<

bench: $(TEST_DEPS) all $(B)/bench-relay
	@python3 tests/bench/bench.py

fuzz: $(TEST_DEPS)
	@sh tests/fuzz/run.sh

fuzz-load: $(TEST_DEPS)
	@sh tests/fuzz/run.sh 60 load_read

# install, test-docker and the packaging targets live in mk/
-include mk/*.mk

# make print-VAR: a variable's value (tests/e2e/test_house.py reads the
# folders' include paths so)
print-%:
	@echo '$($*)'

# Never into a file system mounted under build/ (make test-fresh's root
# has the host's /dev, /proc and /sys while it runs).
clean:
	@! awk '{ print $$2 }' /proc/self/mounts | grep -q '^$(CURDIR)/build/' || \
	    { echo "clean: a file system is mounted under build/ (make test-fresh running?)" >&2; exit 1; }
	rm -rf --one-file-system build

# this build's own dependency files only: build/ also holds other trees
# (the fresh Debian root of make test-fresh, the fuzzer, npm's modules)
-include $(wildcard $(B)/obj/*/*.d $(B)/obj/proxy/*/*.d $(B)/obj/load/*/*.d $(B)/llhttp/*.d $(B)/tests/*.d)

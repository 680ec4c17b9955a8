# ldpref — plain GNU make with pkg-config. Outputs go to $(BUILD).
#
#   make            build everything          make test     install deps, build, run all tests
#   make test-install  the installed layout: docs/client.md's C blocks, pkg-config, man pages
#   make test-python  the Python binding's tests alone (pytest, tests/python)
#   make run        install deps, build, serve on 127.0.0.1:8080
#   make bench      all benchmarks            make install PREFIX=/usr/local
#   make bench-flood  ingest alone and under a flood of anonymous score requests
#   make bench-startup  server start-up time and memory on 10^7 labels
#   make bench-migrate  --migrate-to of 10^6 labels into PostgreSQL, beside pg_restore
#   make soak       60 s of mixed load with the server's memory sampled (a benchmark)
#   make SAN=1 BUILD=build/asan test          sanitizer build of the tests
#   make fuzz       libFuzzer binaries (clang)
#   make reproduce  the privacy/robustness study -> docs/results/ (QUICK=1: reduced
#                   grid -> $(BUILD)/study-quick/, also run by make test)
#   make reproduce-live   the same study against live servers (docs/results/live.md)

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
SAN     ?=
QUICK   ?= 0
# The one version of the project: the library (ldpref_version(), the
# installed libldpref.so.$(VERSION), ldpref.pc), the CLIs' --version and the
# server's /v1/healthz. Its MAJOR.MINOR is the newest symbol-version node of
# client/lib/libldpref.map (LDPREF_0.4): tests/unit/test_client_version.c
# fails when they disagree.
VERSION := 0.5.0

PKGS    := libmicrohttpd jansson libsodium sqlite3 libcurl openblas
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -llbfgs -lunistring -lm -lpthread
CLIENT_PKGS := libcurl libsodium jansson sqlite3 libmicrohttpd
# libunistring (no pkg-config file on Debian): the memo's text normalization.
CLIENT_LIBS := $(shell pkg-config --libs $(CLIENT_PKGS) 2>/dev/null) -lunistring -lm -lpthread
# libpq: the PostgreSQL driver (server/db/sql_pg.c), linked into the server
# and the tests, not into the client library or the CLIs.
PG_CFLAGS := $(shell pkg-config --cflags libpq 2>/dev/null)
PG_LIBS   := $(shell pkg-config --libs libpq 2>/dev/null)
# The ldpref CLI alone draws on the terminal (ldpref label): ncursesw.
CLI_CFLAGS  := $(shell pkg-config --cflags ncursesw 2>/dev/null)
CLI_LIBS    := $(shell pkg-config --libs ncursesw 2>/dev/null)

CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -fPIC -Wall -Wextra -Wshadow -Wstrict-prototypes \
           -Wno-unused-parameter -DLDPREF_VERSION='"$(VERSION)"' $(PKG_CFLAGS) $(PG_CFLAGS)
LDFLAGS ?=
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(SAN),fuzz)
CFLAGS  += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif

# ---- layers ---------------------------------------------------------------
# One folder per layer. Each layer's sources see only the headers of the
# layers below it (include paths per folder), so reaching across a boundary
# is a compile error. Lowest first:
#
#   common/           error table, RR, canonical bytes, JSON wire, clock, buffers
#   client/lib/       libldpref                      -> common
#   client/cli/       the ldpref CLI                 -> client/lib/ldpref.h only
#   server/engine/    training engine                -> common
#   server/research/  simulation, sweep, study       -> engine, common
#   server/db/        storage engine, repositories   -> common (its internal/
#                     headers, the SQLite ones, are seen by server/db/ and tests only)
#   server/service/   learner, served models, corruption views, auth -> db, engine, common
#   server/api/       routing and handlers           -> service, db, engine, common
#   server/http/      libmicrohttpd transport        -> api, common
#   server/cmd/       ldpref-server and ldpref-train mains (wire everything)
#   tests/            every header, plus tests/support
INC_common   := -Icommon
INC_clientlib:= $(INC_common) -Iclient/lib
INC_cli      := -Iclient/lib
INC_engine   := $(INC_common) -Iserver/engine
INC_research := $(INC_engine) -Iserver/research
INC_db       := $(INC_common) -Iserver/db -Iserver/db/internal
INC_service  := $(INC_common) -Iserver/engine -Iserver/db -Iserver/service
INC_api      := $(INC_service) -Iserver/api
INC_http     := $(INC_common) -Iserver/api -Iserver/http
INC_cmd      := $(INC_api) -Iserver/research -Iserver/http -Iserver/cmd
INC_tests    := $(INC_cmd) -Iserver/db/internal -Iclient/lib -Itests/support

COMMON_SRC   := $(wildcard common/*.c)
CLIENT_SRC   := $(wildcard client/lib/*.c)
CLI_SRC      := $(wildcard client/cli/*.c)
# The local web page's files, embedded in libldpref (client/lib/ui_assets.h).
UI_ASSETS    := $(sort $(wildcard client/lib/ui/*))
UI_ASSETS_C  := $(BUILD)/gen/ui_assets.c
UI_ASSETS_O  := $(BUILD)/obj/gen/ui_assets.o
# The operator console's files, embedded in the server (server/api/console_assets.h).
CONSOLE_ASSETS   := $(sort $(wildcard server/api/console/*))
CONSOLE_ASSETS_C := $(BUILD)/gen/console_assets.c
CONSOLE_ASSETS_O := $(BUILD)/obj/gen/console_assets.o
# The PostgreSQL schema's files, embedded in the db layer (server/db/internal/schema_pg.h).
PG_SCHEMA        := $(sort $(wildcard schema/postgresql/[0-9][0-9][0-9]_*.sql))
PG_SCHEMA_C      := $(BUILD)/gen/pg_schema_files.c
PG_SCHEMA_O      := $(BUILD)/obj/gen/pg_schema_files.o
ENGINE_SRC   := $(wildcard server/engine/*.c)
RESEARCH_SRC := $(wildcard server/research/*.c)
DB_SRC       := $(wildcard server/db/*.c)
SERVICE_SRC  := $(wildcard server/service/*.c)
API_SRC      := $(wildcard server/api/*.c)
HTTP_SRC     := $(wildcard server/http/*.c)
CMD_SRC      := server/cmd/config.c
SUPPORT_SRC  := $(wildcard tests/support/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

$(BUILD)/obj/common/%.o:          LAYER_INC = $(INC_common)
$(BUILD)/obj/client/lib/%.o:      LAYER_INC = $(INC_clientlib)
$(BUILD)/obj/client/cli/%.o:      LAYER_INC = $(INC_cli) $(CLI_CFLAGS)
$(BUILD)/obj/server/engine/%.o:   LAYER_INC = $(INC_engine)
$(BUILD)/obj/server/research/%.o: LAYER_INC = $(INC_research)
$(BUILD)/obj/server/db/%.o:       LAYER_INC = $(INC_db)
$(BUILD)/obj/server/service/%.o:  LAYER_INC = $(INC_service)
$(BUILD)/obj/server/api/%.o:      LAYER_INC = $(INC_api)
$(BUILD)/obj/server/http/%.o:     LAYER_INC = $(INC_http)
$(BUILD)/obj/server/cmd/%.o:      LAYER_INC = $(INC_cmd)
$(BUILD)/obj/tests/%.o:           LAYER_INC = $(INC_tests)

LIB_COMMON   := $(BUILD)/libldpref-common.a
LIB_CLIENT   := $(BUILD)/libldpref.a
SO_CLIENT    := $(BUILD)/libldpref.so
LIB_ENGINE   := $(BUILD)/libldpref-engine.a
LIB_RESEARCH := $(BUILD)/libldpref-research.a
LIB_DB       := $(BUILD)/libldpref-db.a
LIB_SERVICE  := $(BUILD)/libldpref-service.a
LIB_API      := $(BUILD)/libldpref-api.a
LIB_HTTP     := $(BUILD)/libldpref-http.a
LIB_CMD      := $(BUILD)/libldpref-servercmd.a
LIB_SUPPORT  := $(BUILD)/libldpref-testsupport.a
BINS         := $(BUILD)/ldpref $(BUILD)/ldpref-server $(BUILD)/ldpref-train
# Manual pages, each from its binary's hidden --man (the tables --help prints).
MANS         := $(patsubst $(BUILD)/%,$(BUILD)/man/%.1,$(BINS))
# The server's layers in link order (highest first).
SERVER_LIBS  := $(LIB_HTTP) $(LIB_API) $(LIB_SERVICE) $(LIB_DB) $(LIB_ENGINE) $(LIB_COMMON)
# Everything internal, in link order (libldpref.a carries common/ as well).
ALL_LIBS     := $(LIB_SUPPORT) $(LIB_CMD) $(LIB_HTTP) $(LIB_API) $(LIB_SERVICE) $(LIB_DB) $(LIB_RESEARCH) \
                $(LIB_ENGINE) $(LIB_CLIENT)

UNIT_TESTS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
E2E_TESTS   := $(patsubst tests/e2e/%.c,$(BUILD)/tests/%,$(wildcard tests/e2e/e2e_*.c))
FUZZ_SRC    := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(BUILD)/tests/replay_%,$(FUZZ_SRC))
BENCHES     := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(wildcard tests/bench/bench_*.c))
STUDIES     := $(patsubst tests/study/%.c,$(BUILD)/study/%,$(wildcard tests/study/*.c))
PY_TESTS    := $(BUILD)/tests/test_python

.PHONY: FORCE all test run install uninstall clean bench soak check-layers \
        fuzz fuzz-bins format check-format deps tests reproduce reproduce-live test-install \
        test-python
all: check-layers $(BINS) $(SO_CLIENT) $(BUILD)/ldpref.pc $(MANS)

# Every object is compiled with -DLDPREF_VERSION: the stamp (rewritten only
# when VERSION changes) rebuilds them when it does.
VERSION_STAMP := $(BUILD)/version.stamp
$(VERSION_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(VERSION)' | cmp -s - $@ || echo '$(VERSION)' > $@
FORCE:

$(BUILD)/obj/%.o: %.c $(VERSION_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LAYER_INC) -MMD -MP -c $< -o $@

# The libraries with a single home: only server/db/ includes sqlite3.h
# (the client's local ledger and memo use SQLite through their own files),
# and there only the SQLite engine backend and its driver (DB_SQLITE_FILES):
# the repositories speak the statement API (server/db/internal/sql.h), and
# the public db headers do not mention SQLite; libpq only in the PostgreSQL
# engine backend and driver (DB_PG_FILES; the tests' server harness aside);
# only server/http/ and the client library's local web page
# (client/lib/ui.c) include microhttpd.h.
DB_SQLITE_FILES := server/db/engine_sqlite.c server/db/walbuf.c server/db/sql_sqlite.c \
                   server/db/internal/walbuf.h server/db/internal/sql_sqlite.h
DB_PG_FILES     := server/db/engine_pg.c server/db/sql_pg.c server/db/internal/sql_pg.h \
                   server/db/copy_pg.c
check-layers:
	@bad=$$(grep -ln '^#include <sqlite3.h>' $$(git ls-files 'server/*.c' 'server/*.h' 2>/dev/null || find server -name '*.[ch]') \
	        | grep -v '^server/db/'); \
	 if [ -n "$$bad" ]; then echo "layering: sqlite3.h outside server/db/: $$bad" >&2; exit 1; fi
	@bad=$$(grep -l 'sqlite3' server/db/*.h); \
	 if [ -n "$$bad" ]; then echo "layering: a public db header mentions sqlite3: $$bad" >&2; exit 1; fi
	@bad=$$(grep -lE 'sqlite3|SQLITE_' server/db/*.[ch] server/db/internal/*.h \
	        | grep -vxF $(addprefix -e ,$(DB_SQLITE_FILES))); \
	 if [ -n "$$bad" ]; then echo "layering: SQLite outside its engine and driver (use internal/sql.h): $$bad" >&2; exit 1; fi
	@bad=$$(grep -rlE 'libpq-fe\.h|PGconn|PGresult' server client common \
	        | grep -vxF $(addprefix -e ,$(DB_PG_FILES))); \
	 if [ -n "$$bad" ]; then echo "layering: libpq outside the PostgreSQL driver: $$bad" >&2; exit 1; fi
	@bad=$$(grep -rln '^#include <microhttpd.h>' server client common | grep -v '^server/http/' | grep -vx 'client/lib/ui.c'); \
	 if [ -n "$$bad" ]; then echo "layering: microhttpd.h outside server/http/ and client/lib/ui.c: $$bad" >&2; exit 1; fi

$(LIB_COMMON):   $(call obj,$(COMMON_SRC))
$(LIB_CLIENT):   $(call obj,$(CLIENT_SRC) $(COMMON_SRC)) $(UI_ASSETS_O)
$(LIB_ENGINE):   $(call obj,$(ENGINE_SRC))
$(LIB_RESEARCH): $(call obj,$(RESEARCH_SRC))
$(LIB_DB):       $(call obj,$(DB_SRC)) $(PG_SCHEMA_O)
$(LIB_SERVICE):  $(call obj,$(SERVICE_SRC))
$(LIB_API):      $(call obj,$(API_SRC)) $(CONSOLE_ASSETS_O)
$(LIB_HTTP):     $(call obj,$(HTTP_SRC))
$(LIB_CMD):      $(call obj,$(CMD_SRC))
$(LIB_SUPPORT):  $(call obj,$(SUPPORT_SRC))
$(BUILD)/%.a:
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(SO_CLIENT): $(call obj,$(CLIENT_SRC) $(COMMON_SRC)) $(UI_ASSETS_O) client/lib/libldpref.map
	$(CC) -shared -Wl,-soname,libldpref.so.0 -Wl,--version-script=client/lib/libldpref.map \
	    $(LDFLAGS) -o $@ $(filter %.o,$^) $(CLIENT_LIBS)

# A folder's files as a C table (xxd -i reading stdin prints just the
# bytes): $(call embed,FILES,HEADER,TYPE,TABLE,PREFIX) writes $@, whose
# entries are {"PREFIX<file name>", bytes, length}, ended by a NULL name.
embed = { echo '/* Generated by the Makefile: do not edit. */'; \
	  echo '\#include "$(2)"'; i=0; \
	  for f in $(1); do echo "static const unsigned char asset_$$i[] = {"; \
	    xxd -i < $$f || exit 1; echo '};'; i=$$((i + 1)); done; \
	  echo 'const $(3) $(4)[] = {'; i=0; \
	  for f in $(1); do echo "    {\"$(5)$${f\#\#*/}\", asset_$$i, sizeof asset_$$i},"; \
	    i=$$((i + 1)); done; \
	  echo '    {NULL, NULL, 0}};'; } > $@.tmp && mv $@.tmp $@
$(UI_ASSETS_C): $(UI_ASSETS) Makefile
	@mkdir -p $(dir $@)
	$(call embed,$(UI_ASSETS),ui_assets.h,lpc_ui_asset,lpc_ui_assets,/)
$(UI_ASSETS_O): $(UI_ASSETS_C) client/lib/ui_assets.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC_clientlib) -c $< -o $@
$(CONSOLE_ASSETS_C): $(CONSOLE_ASSETS) Makefile
	@mkdir -p $(dir $@)
	$(call embed,$(CONSOLE_ASSETS),console_assets.h,lp_console_asset,lp_console_assets,)
$(CONSOLE_ASSETS_O): $(CONSOLE_ASSETS_C) server/api/console_assets.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC_api) -c $< -o $@
$(PG_SCHEMA_C): $(PG_SCHEMA) Makefile
	@mkdir -p $(dir $@)
	$(call embed,$(PG_SCHEMA),schema_pg.h,lp_pg_schema_file,lp_pg_schema_files,)
$(PG_SCHEMA_O): $(PG_SCHEMA_C) server/db/internal/schema_pg.h server/db/internal/sql.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC_db) -c $< -o $@

$(BUILD)/ldpref: $(call obj,$(CLI_SRC)) $(LIB_CLIENT)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(CLI_LIBS)
$(BUILD)/ldpref-server: $(call obj,server/cmd/server_main.c) $(LIB_CMD) $(SERVER_LIBS)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(PG_LIBS)
$(BUILD)/ldpref-train: $(call obj,server/cmd/train_main.c) $(LIB_RESEARCH) $(LIB_ENGINE) $(LIB_COMMON)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/man/%.1: $(BUILD)/% deploy/manpage.awk
	@mkdir -p $(dir $@)
	$< --man > $@.records && awk -v version=$(VERSION) -f deploy/manpage.awk $@.records > $@.tmp
	@rm -f $@.records && mv $@.tmp $@

$(BUILD)/ldpref.pc: client/lib/ldpref.pc.in
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' $< > $@
.PHONY: $(BUILD)/ldpref.pc

# Tests link every internal library; each binary prints "N passed, N failed".
$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(PG_LIBS)
$(BUILD)/tests/e2e_%: $(BUILD)/obj/tests/e2e/e2e_%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(PG_LIBS)
# Fuzz targets replayed over their corpora with the normal compiler.
$(BUILD)/tests/replay_%: $(BUILD)/obj/tests/fuzz/%.o $(BUILD)/obj/tests/fuzz/replay_main.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(PG_LIBS)
$(BUILD)/bench/%: $(BUILD)/obj/tests/bench/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(PG_LIBS)
$(BUILD)/study/%: $(BUILD)/obj/tests/study/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(PG_LIBS)

tests: all $(UNIT_TESTS) $(E2E_TESTS) $(FUZZ_REPLAY) $(PY_TESTS)

# The Python binding's tests (pytest, tests/python/run.sh) behind a wrapper
# in $(BUILD)/tests, so tests/run.sh runs and counts them like a test binary.
$(PY_TESTS): tests/python/run.sh
	@mkdir -p $(dir $@)
	printf '#!/bin/sh\nLDPREF_BUILD=$${LDPREF_BUILD:-$(BUILD)} exec "%s/tests/python/run.sh" "$$@"\n' \
	    "$(CURDIR)" > $@ && chmod +x $@
test-python: all $(PY_TESTS)
	LDPREF_BUILD=$(BUILD) $(PY_TESTS)

# Like `make run`, `make test` first installs what is missing (a fast no-op
# when everything is there), then builds in a fresh make so pkg-config sees
# the new packages.
test: deps
	$(MAKE) tests
	BUILD=$(BUILD) LDPREF_SAN=$(SAN) tests/run.sh

# The installed layout alone (also part of `make test`): make install into a
# temporary prefix, docs/client.md's C blocks, pkg-config, the manual pages.
test-install: all
	BUILD=$(BUILD) LDPREF_SAN=$(SAN) tests/install/run.sh

deps:
	deploy/install-deps.sh

# OPENBLAS_CORETYPE: Debian's OpenBLAS does not recognise this CPU and falls
# back to generic kernels; deploy/openblas-env.sh picks the fastest it can.
run: deps
	$(MAKE) all
	@mkdir -p var
	. deploy/openblas-env.sh && exec $(BUILD)/ldpref-server --db var/ldpref.db

# The papers' claims, simulated: tests/study/reproduce.sh (sweep, OASST cv,
# report, gnuplot). QUICK=1 never writes docs/results.
reproduce: all
	BUILD=$(BUILD) QUICK=$(QUICK) tests/study/reproduce.sh

bench: bench-ingest bench-flood bench-train bench-score bench-metrics bench-guard bench-audit bench-startup \
       bench-migrate bench-upload
# Each benchmark is a script tests/bench/<name>.sh printing "BENCH <name> <value> <unit>".
bench-%: all $(BENCHES)
	BUILD=$(BUILD) tests/bench/$*.sh

# A soak, not a test: labels, batches, scoring, retrains and activations at
# once for LDPREF_SOAK_SECONDS (60), the server's RSS sampled each second.
soak: bench-soak

# The live-service variant of the privacy/robustness study: simulated
# annotators through the real client library against real servers, checked
# against the offline pipeline; writes docs/results/live.md, fails on
# disagreement. Not part of `make test` (a few minutes).
reproduce-live: all $(STUDIES)
	BUILD=$(BUILD) tests/study/live.sh

# libFuzzer: every library is built with coverage (fuzzer-no-link) in its own
# build directory, so the fuzzers see into the code they exercise.
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
fuzz:
	$(MAKE) CC=clang SAN=fuzz BUILD=build/fuzz fuzz-bins
fuzz-bins: $(FUZZ_BINS)
$(BUILD)/fuzz/%: $(BUILD)/obj/tests/fuzz/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS) $(PG_LIBS)

# Any PREFIX works without LD_LIBRARY_PATH or ldconfig: the CLIs link
# libldpref statically, and ldpref.pc's Libs carry an rpath to $(PREFIX)/lib
# for programs built against libldpref.so (docs/client.md "Installing").
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include \
	    $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(LIB_CLIENT) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SO_CLIENT) $(DESTDIR)$(PREFIX)/lib/libldpref.so.$(VERSION)
	ln -sf libldpref.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libldpref.so.0
	ln -sf libldpref.so.0 $(DESTDIR)$(PREFIX)/lib/libldpref.so
	install -m 644 client/lib/ldpref.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/ldpref.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -m 644 $(MANS) $(DESTDIR)$(PREFIX)/share/man/man1/

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,ldpref ldpref-server ldpref-train) \
	      $(DESTDIR)$(PREFIX)/lib/libldpref.* $(DESTDIR)$(PREFIX)/include/ldpref.h \
	      $(DESTDIR)$(PREFIX)/lib/pkgconfig/ldpref.pc \
	      $(addprefix $(DESTDIR)$(PREFIX)/share/man/man1/,ldpref.1 ldpref-server.1 ldpref-train.1)

FORMAT_FILES = $(shell git ls-files '*.c' '*.h')
format:
	clang-format -i $(FORMAT_FILES)
check-format:
	clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD)

.SECONDARY:
-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

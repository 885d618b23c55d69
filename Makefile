# sandgate - one binary, ./sandgate, built from the folders of DESIGN.md.
#   make            build ./sandgate (installs missing Debian packages first)
#   make test       unit + integration tests; SAN=1 for ASan + UBSan
#   make demo       run the walkthrough (examples/demo.sh)
#   make fuzz       build the libFuzzer targets and run each briefly
#   make bench      benchmarks side by side with peer proxies (tests/bench/)
#   CC=clang        any C11 compiler; gcc and clang are both kept warning-free

CC      ?= cc
LIBS    := openssl libnghttp2 libcares libmaxminddb libpcre2-8 yaml-0.1 libseccomp
SRCDIRS := lib tls policy audit gateway adapters
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo 0.1)

ifeq ($(SAN),1)
BUILD   := build/san
SANFL   := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
OPT     := -O1 -g
BIN     := $(BUILD)/sandgate
else
BUILD   := build/rel
SANFL   :=
OPT     ?= -O2 -g
BIN     := sandgate
endif

CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
           -Wmissing-prototypes -Wpointer-arith -Wformat=2 -fstack-protector-strong \
           -D_FORTIFY_SOURCE=2 -pthread $(OPT) $(SANFL) -I. -Ilib -I$(BUILD)
# pkg-config is read lazily: the deps step may have to install it first
PKG_CFLAGS = $(shell pkg-config --cflags $(LIBS))
PKG_LIBS   = $(shell pkg-config --libs $(LIBS))
LDFLAGS += -pthread $(SANFL) -Wl,-z,relro,-z,now

SRCS    := $(foreach d,$(SRCDIRS),$(wildcard $(d)/*.c))
OBJS    := $(patsubst %.c,$(BUILD)/%.o,$(SRCS))
LIBOBJS := $(filter-out $(BUILD)/gateway/main.o,$(OBJS))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))

.PHONY: all deps test unit demo fuzz bench clean
all: deps $(BIN)

deps:
	@scripts/deps.sh build

$(BIN): $(OBJS)
	$(CC) -o $@ $^ $(LDFLAGS) $(PKG_LIBS)
	@ln -sf $(notdir $(BIN)) $(dir $(BIN))sandgate-cni   # the CNI plugin is argv[0] "sandgate-cni"

# The version is a generated header, rewritten only when it changes, so the
# objects that print it are rebuilt when the commit changes (a -D flag would
# leave them stale) and nothing else is.
VERSION_H := $(BUILD)/sg_version.h
$(VERSION_H): FORCE
	@mkdir -p $(dir $@)
	@v='#define SG_VERSION "$(VERSION)"'; [ "$$(cat $@ 2>/dev/null)" = "$$v" ] || \
		{ echo "$$v" >$@.tmp.$$$$ && mv -f $@.tmp.$$$$ $@; }
.PHONY: FORCE
FORCE:

$(BUILD)/%.o: %.c | deps $(VERSION_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/tests/test_%: tests/unit/test_%.c $(LIBOBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -Itests/unit -o $@ $^ $(LDFLAGS) $(PKG_LIBS) -lcmocka

unit: $(UNIT_BINS)

test:
	@scripts/deps.sh test
	@$(MAKE) --no-print-directory $(BIN) unit
	@SANDGATE=$(abspath $(BIN)) UNIT_DIR=$(abspath $(BUILD)/tests) tests/run $(T)

demo: all
	@scripts/deps.sh demo
	@examples/demo.sh

FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
fuzz:
	@scripts/deps.sh test
	@$(MAKE) --no-print-directory CC=clang BUILD=build/fuzz \
		SANFL='-fsanitize=fuzzer-no-link,address,undefined' OPT='-O1 -g' \
		$(patsubst tests/fuzz/%.c,build/fuzz/%,$(FUZZ_SRCS))
	@for f in $(patsubst tests/fuzz/%.c,build/fuzz/%,$(FUZZ_SRCS)); do \
		n=$$(basename $$f); echo "fuzz: $$n"; \
		mkdir -p build/fuzz/$$n.corpus; \
		$$f -max_total_time=$${FUZZ_SECONDS:-20} -print_final_stats=0 \
		    build/fuzz/$$n.corpus tests/fuzz/corpus/$$n >/dev/null 2>build/fuzz/$$n.log || { tail -30 build/fuzz/$$n.log; exit 1; }; \
	done

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(LIBOBJS)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS) -pthread

bench: all
	@scripts/deps.sh bench
	@tests/bench/run

clean:
	rm -rf build sandgate sandgate-cni

-include $(OBJS:.o=.d)

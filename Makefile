# nibble: plain make. Targets: all (default), test, asan, fuzz, bench, demo, install, clean.
# Default build runs on any x86-64: ISA-specific sources get their own flags and are chosen at run
# time (src/base/cpu.c), never by compiling for the build machine. Other CPUs (ARM) build the
# portable reference kernels only (src/kernels/ref/).

.DEFAULT_GOAL := all # the DEPS rule below comes first

CC      ?= cc
PREFIX  ?= /usr/local
BUILD   ?= build
OPT     ?= -O2
CFLAGS_BASE := -std=c11 $(OPT) -g -Wall -Wextra -Werror -Wshadow -Wvla -fPIC -pthread \
               -D_GNU_SOURCE -Iinclude -Isrc -I.
SAN     ?=
CFLAGS_ALL := $(CFLAGS_BASE) $(SAN) $(EXTRA_CFLAGS)
LDLIBS  := -lm -pthread -lpcre2-32
# `nibble serve` (src/serve/, linked into the binary, not into libnibble): HTTP and JSON.
SERVE_LIBS := -lmicrohttpd -lcjson

# Debian -dev packages the build needs (PCRE2 for the BPE pre-tokenizer; libmicrohttpd and cJSON
# for the server): installed when missing, by one run of the script for all three (a grouped
# target: under -j, separate runs would race for apt's lock).
DEPS    := /usr/include/pcre2.h /usr/include/microhttpd.h /usr/include/cjson/cJSON.h
$(DEPS) &:
	bash scripts/install-deps.sh

# The library's objects export only what include/nibble.h marks NB_API (libnibble.so's ABI); the
# static archive links the hidden rest as before.
LIB_FLAGS    := -fvisibility=hidden
AVX2_FLAGS   := -mavx2 -mfma -mf16c
AVX512_FLAGS := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni

LIB_SRC    := $(sort $(shell find src -name '*.c' -not -path 'src/kernels/x86/*' -not -path 'src/serve/*'))
SERVE_SRC  := $(sort $(wildcard src/serve/*.c))
X86        := $(filter x86_64-% i686-% i386-%,$(shell $(CC) -dumpmachine))
AVX2_SRC   := $(if $(X86),$(sort $(wildcard src/kernels/x86/avx2/*.c)))
AVX512_SRC := $(if $(X86),$(sort $(wildcard src/kernels/x86/avx512/*.c)))
CLI_SRC    := $(sort $(wildcard cli/*.c))
TEST_SRC   := $(sort $(wildcard tests/test_*.c))
BENCH_SRC  := $(sort $(wildcard bench/*.c))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(AVX2_SRC:%.c=$(BUILD)/%.o) $(AVX512_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o) $(SERVE_SRC:%.c=$(BUILD)/%.o)
TESTS   := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCHES := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

LIBA  := $(BUILD)/libnibble.a
LIBSO := $(BUILD)/libnibble.so
BIN   := $(BUILD)/nibble

VENV   := $(BUILD)/venv
PY     := $(VENV)/bin/python

# demo and test build through a sub-make with one job per CPU, unless the user gave -j (read at
# recipe time: only then does MAKEFLAGS show it).
NPROC := $(shell nproc 2>/dev/null || echo 1)
PAR    = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))

.PHONY: FORCE all test test-c test-parity asan fuzz bench demo install clean venv grid test-prereqs demo-prereqs
all: $(LIBA) $(LIBSO) $(BIN)

$(BUILD)/src/kernels/x86/avx2/%.o: src/kernels/x86/avx2/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(LIB_FLAGS) $(AVX2_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/src/kernels/x86/avx512/%.o: src/kernels/x86/avx512/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(LIB_FLAGS) $(AVX512_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/src/%.o: src/%.c | $(DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(LIB_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c | $(DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

# The commit `nibble bench` reports (llama-bench's build_commit): the header is rewritten only when
# HEAD moves, so only bench_model.o follows it.
$(BUILD)/build_commit.h: FORCE
	@mkdir -p $(@D)
	@c=$$(git rev-parse --short HEAD 2>/dev/null || echo unknown); l="#define NB_BUILD_COMMIT \"$$c\""; \
	    [ "$$(cat $@ 2>/dev/null)" = "$$l" ] || echo "$$l" > $@
$(BUILD)/cli/bench_model.o: $(BUILD)/build_commit.h
$(BUILD)/cli/bench_model.o: CFLAGS_ALL += -I$(BUILD)
FORCE:

$(LIBA): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(LIBSO): $(LIB_OBJ)
	$(CC) $(SAN) -shared -o $@ $^ $(LDLIBS)

$(BIN): $(CLI_OBJ) $(LIBA)
	$(CC) $(SAN) -o $@ $(CLI_OBJ) $(LIBA) $(LDLIBS) $(SERVE_LIBS)

$(BUILD)/tests/%: tests/%.c tests/test.h $(LIBA)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -Itests -MMD -MP -o $@ $< $(LIBA) $(LDLIBS)

# test_bench parses `nibble bench -o json` with cJSON, the server's JSON library
$(BUILD)/tests/test_bench: LDLIBS += -lcjson

$(BUILD)/bench/%: bench/%.c $(LIBA)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -MMD -MP -o $@ $< $(LIBA) $(LDLIBS)

# Python oracles (gguf, numpy, llama-cpp-python) live in a virtual environment under build/.
venv: $(VENV)/.stamp
$(VENV)/.stamp: scripts/setup-venv.sh tests/parity/requirements.txt
	bash scripts/setup-venv.sh $(VENV) tests/parity/requirements.txt
	@touch $@

# The default model (models/, ignored by git): make test fetches it; tests that need it say
# "skipped" where it is absent (test-c, asan).
MODEL := models/gemma-3-270m-q4_k_m.gguf
$(MODEL): scripts/fetch-model.sh
	bash scripts/fetch-model.sh >/dev/null

# llama.cpp's source tree from the pinned llama-cpp-python's sdist (build/llama-src, ignored): its
# vocabularies and chat template files are test vectors for C and parity tests alike.
LLAMA_SRC := build/llama-src/.stamp
$(LLAMA_SRC): scripts/fetch-llama-src.sh tests/parity/requirements.txt $(VENV)/.stamp
	bash scripts/fetch-llama-src.sh $(VENV)/bin/pip >/dev/null
	@touch $@

# Every C test program, then the parity tier; tests/run.sh sums them into one closing line.
# The build finishes before run.sh starts, so its total stays the last line.
test:
	@$(MAKE) --no-print-directory $(PAR) test-prereqs
	@bash tests/run.sh $(BUILD) $(PY)

# with a recipe, an up-to-date sub-make stays silent
test-prereqs: all $(TESTS) $(VENV)/.stamp $(MODEL) $(LLAMA_SRC)
	@:

test-c: all $(TESTS)
	@bash tests/run.sh $(BUILD)

asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test-c

fuzz: | $(DEPS)
	$(MAKE) -C fuzz

# Fetches the default model (Gemma 3 270M Q4_K_M, PyPI) into models/ and generates text with it.
# It is a base (pretrained) model: it continues text; it was not tuned to follow chat turns.
DEMO_PROMPT := Once upon a time, a small robot in a quiet workshop decided to learn how to paint.
demo:
	@$(MAKE) --no-print-directory $(PAR) demo-prereqs
	@bash scripts/fetch-model.sh >/dev/null
	$(BIN) run -m $(MODEL) -p '$(DEMO_PROMPT)' -n 128 --seed 42

demo-prereqs: all $(MODEL)
	@:

# Benchmarks print numbers (docs/BENCHMARKS.md records them); nothing here passes or fails.
# Side by side with llama.cpp: $(PY) bench/vs_llama.py, $(PY) bench/quantize_vs_llama.py; before/after
# a change: bench/ab.sh OLD_NIBBLE NEW_NIBBLE (whole runs), python3 bench/ab_kernels.py OLD_BENCH_BATCH
# NEW_BENCH_BATCH ROUNDS ARGS (kernels).
bench: all $(BENCHES) $(MODEL)
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done
	$(BIN) bench kernels -t 1,2
	$(BIN) bench roofline -m $(MODEL) -t 1,2

# The quality grid: every quantization recipe of the default model (perplexity / KL divergence /
# speed), then the context x KV-cell grid (windows to 32768, cache cell types, pass-key retrieval);
# rewrites the results parts of docs/QUALITY.md (about 40 minutes on 2 cores). The second runs even
# when a variant of the first failed; make fails if either did.
grid: all
	python3 bench/grid.py $(GRID_ARGS); s=$$?; python3 bench/grid_context.py $(GRID_CONTEXT_ARGS) && exit $$s

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIBSO) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/nibble.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' scripts/nibble.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/nibble.pc

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD) build-asan -name '*.d' 2>/dev/null)

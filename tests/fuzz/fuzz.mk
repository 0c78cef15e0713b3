# Fuzzing (libFuzzer) and sanitizer builds; included by the top Makefile. See docs/ROBUSTNESS.md.
#   make fuzz [FUZZ_SECONDS=N]   builds every fuzz target and runs each for N seconds
#   make fuzz-build              the targets and their seed corpora only (tests/fuzz/tmp/)
#   make test-asan               run, train and the whole suite under ASan + UBSan, in build/asan/
# (fuzz-run-% is not declared phony: make does not apply pattern rules to phony targets)
.PHONY: fuzz fuzz-build test-asan

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = model tokenizer sampler learn
FUZZ_DIR = tests/fuzz/tmp
SHARED_DIR ?= $(abspath ../shared)
# -O1 -g: sanitizer reports with usable stacks; no -fopenmp (clang's runtime is not ours),
# so the kernels' OpenMP pragmas are ignored and every target is single-threaded.
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O1 $(ARCH_FLAGS) -fno-omit-frame-pointer \
  -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wno-unknown-pragmas \
  -DSHARED_DIR='"$(SHARED_DIR)"'
FUZZ_DEPS = tests/fuzz/fuzz.h $(MODEL_DEPS) $(TRAIN_DEPS) $(TOKENIZER_DEPS) $(CHAT_DEPS)
# Inputs longer than this are cut: enough for small model files and every tokenizer blob
# the seeds hold, short enough to keep executions fast.
FUZZ_MAX_LEN_model = 65536
FUZZ_MAX_LEN_tokenizer = 16384
FUZZ_MAX_LEN_sampler = 1024
FUZZ_MAX_LEN_learn = 4096

# The tokenizer's and chat formats' objects are compiled once for every target and seed writer,
# with the fuzzer's coverage instrumentation (which a seed writer links and leaves unused).
FUZZ_OBJ = $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(TOKENIZER_SRC) $(CHAT_SRC))
$(FUZZ_DIR)/obj/%.o: %.c $(TOKENIZER_DEPS) $(CHAT_DEPS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_DIR)/bin/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_DEPS) $(FUZZ_OBJ)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJ) $(LDLIBS)

# -O0: a seed writer runs for milliseconds, and compiles in a ninth of -O1's time.
$(FUZZ_DIR)/bin/seeds_%: tests/fuzz/fuzz_%.c $(FUZZ_DEPS) $(FUZZ_OBJ)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -O0 -DMAKE_SEEDS -o $@ $< $(FUZZ_OBJ) $(LDLIBS)

# Seeds: what each target's seed writer makes, plus for the loader stories260K converted
# (cut to FUZZ_MAX_LEN_model when fuzzed) and its tokenizer blob as a tokenizer input.
$(FUZZ_DIR)/seeds/%/.done: $(FUZZ_DIR)/bin/seeds_%
	@rm -rf $(@D) && mkdir -p $(@D)
	$< $(@D)
	@if [ $* = model ] && [ -f $(SHARED_DIR)/models/stories260K.bin ]; then \
	  $(PYTHON) tools/convert.py $(SHARED_DIR)/models/stories260K.bin $(@D)/stories260K.bin \
	    --tokenizer $(SHARED_DIR)/models/tok512.bin >/dev/null; fi
	@if [ $* = tokenizer ] && [ -f $(SHARED_DIR)/models/stories260K.bin ]; then \
	  $(PYTHON) tools/convert.py $(SHARED_DIR)/models/stories260K.bin $(FUZZ_DIR)/stories260K.bin --force \
	    --tokenizer $(SHARED_DIR)/models/tok512.bin >/dev/null && \
	  $(PYTHON) -c 'import struct, sys; d = open(sys.argv[1], "rb").read(); n = struct.unpack_from("<Q", d, 112)[0]; \
	    open(sys.argv[2], "wb").write(bytes([0, 0x0c, 1, 2]) + d[256:256 + n])' $(FUZZ_DIR)/stories260K.bin $(@D)/tok512; fi
	@touch $@

# The seed writers are kept: make would delete them as intermediates.
.SECONDARY: $(foreach t,$(FUZZ_TARGETS),$(FUZZ_DIR)/bin/seeds_$(t))

fuzz-build: $(foreach t,$(FUZZ_TARGETS),$(FUZZ_DIR)/bin/fuzz_$(t) $(FUZZ_DIR)/seeds/$(t)/.done)

# Each target grows its own corpus in tests/fuzz/tmp/corpus/<target> and logs to
# tests/fuzz/tmp/logs/; a crash lands in tests/fuzz/tmp/crashes/ (it becomes a file in
# tests/fuzz/regressions/<target>/ with its fix, replayed by tests/test_fuzz_smoke.sh).
fuzz: $(addprefix fuzz-run-,$(FUZZ_TARGETS))

fuzz-run-%: fuzz-build
	@mkdir -p $(FUZZ_DIR)/corpus/$* $(FUZZ_DIR)/crashes $(FUZZ_DIR)/logs
	@echo "fuzz_$*: $(FUZZ_SECONDS) s"
	@$(FUZZ_DIR)/bin/fuzz_$* $(FUZZ_DIR)/corpus/$* $(FUZZ_DIR)/seeds/$* $(wildcard tests/fuzz/regressions/$*) \
	  -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAX_LEN_$*) -timeout=20 -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ_DIR)/crashes/$*- >$(FUZZ_DIR)/logs/$*.log 2>&1; \
	  rc=$$?; grep -E '^stat::(number_of_executed_units|peak_rss_mb)' $(FUZZ_DIR)/logs/$*.log; \
	  if [ $$rc -ne 0 ]; then grep -E 'ERROR|fuzz check|SUMMARY|Test unit written' $(FUZZ_DIR)/logs/$*.log; \
	    echo "fuzz_$*: FAILED (log: $(FUZZ_DIR)/logs/$*.log)"; exit 1; fi

# make test-asan: the whole suite against run, train and tests built with AddressSanitizer
# and UndefinedBehaviorSanitizer. The tree is copied to build/asan/main (../shared is linked
# beside it, where the tests look for it) and built there with the top Makefile and
# sanitizer CFLAGS, so the normal ./run, ./train and tests/bin stay as they are.
ASAN_DIR = build/asan
ASAN_CFLAGS = -std=c11 -D_DEFAULT_SOURCE -O1 -g $(ARCH_FLAGS) -fopenmp -fno-omit-frame-pointer \
  -fsanitize=address,undefined -fno-sanitize-recover=undefined -Wall -Wextra -Wno-unused-parameter -Wno-format-truncation
# Leak checking stays on: OpenBLAS takes its buffers with mmap and libgomp keeps its thread
# pool reachable, so neither shows up as a leak, and no suppression is needed. The tests
# check for exactly one line on stderr, so a sanitizer report also fails the test that caused
# it, besides the exit code. ASAN_DETECT_LEAKS=0 checks memory errors only (while ./train
# does not free its buffers at exit, every test that runs it fails on leaks).
ASAN_DETECT_LEAKS ?= 1
ASAN_ENV = ASAN_OPTIONS=detect_leaks=$(ASAN_DETECT_LEAKS):abort_on_error=0:exitcode=86 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ATTN_ASAN_SUITE=1

test-asan:
	@rm -rf $(ASAN_DIR)/main && mkdir -p $(ASAN_DIR)/main
	@tar -c --exclude=./.git --exclude=./build --exclude=./tests/tmp --exclude=./tests/bin --exclude=./tests/fuzz/tmp \
	  --exclude=./run --exclude=./train --exclude='*.o' --exclude=./tests/node . | tar -x -C $(ASAN_DIR)/main
	@ln -sfn $(SHARED_DIR) $(ASAN_DIR)/shared
	@mkdir -p tests/node && ln -sfn $(CURDIR)/tests/node $(ASAN_DIR)/main/tests/node # the npm oracles: 400 MB, shared not copied
	@mkdir -p $(ASAN_DIR)/main/tests/bin
	$(CC) $(ASAN_CFLAGS) -o $(ASAN_DIR)/main/tests/bin/tok_cli tests/tok_cli.c $(TOKENIZER_SRC) -lm
	@$(ASAN_ENV) $(MAKE) --no-print-directory -C $(ASAN_DIR)/main check BASE_CFLAGS='$(ASAN_CFLAGS)' PYTHON=$(PYTHON)

# make clean also drops the sanitizer tree and the fuzz binaries, objects and seeds; the fuzz corpora
# (tests/fuzz/tmp/corpus, hours of executions) stay.
.PHONY: clean-robustness
clean: clean-robustness
clean-robustness:
	rm -rf $(ASAN_DIR) $(FUZZ_DIR)/bin $(FUZZ_DIR)/obj $(FUZZ_DIR)/seeds

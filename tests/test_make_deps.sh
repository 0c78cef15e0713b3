#!/usr/bin/env bash
# `make` on a fresh machine, without touching this one's packages: the Makefile runs in a
# sandbox copy (empty sources) with fake dpkg-query, apt-get, sudo, id and cc first on PATH, and
# the real sudo hidden. Each fake logs its call, so the test sees which commands make runs and
# in what order: a machine with every build package never reaches apt; root installs what is
# missing before anything compiles, a user with sudo through sudo, and a user with neither gets
# one line naming the packages and no compiler call.
#   bash tests/test_make_deps.sh
set -u
cd "$(dirname "$0")/.."
tmp=tests/tmp/make_deps.$$
rm -rf "$tmp" && mkdir -p "$tmp/tree/tests/fuzz" "$tmp/fake" "$tmp/tools"
trap '[ "${failed:-1}" = 0 ] && rm -rf "$tmp"' EXIT # kept when something failed
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }

cp Makefile "$tmp/tree/" && cp tests/fuzz/fuzz.mk "$tmp/tree/tests/fuzz/"
mkdir -p "$tmp/tree/chat"
touch "$tmp/tree/run.c" "$tmp/tree/train.c" "$tmp/tree/model.h" "$tmp/tree/tokenizer.h" "$tmp/tree/tokenizer.c" \
  "$tmp/tree/chat/console.c"
log=$(realpath "$tmp")/calls.log
fake=$(realpath "$tmp/fake")
# The tools make and its recipes need, and nothing else: no sudo unless a case adds the fake one.
for t in sh grep cmp mkdir cat echo test uname; do ln -s "$(type -P $t)" "$tmp/tools/$t"; done
# dpkg-query: every package installed but those in FAKE_MISSING
cat >"$fake/dpkg-query" <<'EOF'
#!/bin/sh
for p; do :; done
case " $FAKE_MISSING " in *" $p "*) echo "unknown ok not-installed"; exit 1 ;; esac
echo "install ok installed"
EOF
cat >"$fake/id" <<'EOF'
#!/bin/sh
echo "$FAKE_UID"
EOF
cat >"$fake/apt-get" <<EOF
#!/bin/sh
echo "apt-get \$*" >>$log
EOF
cat >"$fake/sudo" <<EOF
#!/bin/sh
echo "sudo \$1" >>$log
"\$@"
EOF
# cc: the multiarch name the Makefile asks for, else a compile that logs its output's name
cat >"$fake/cc" <<EOF
#!/bin/sh
[ "\$1" = -print-multiarch ] && { echo x86_64-linux-gnu; exit 0; }
while [ \$# -gt 1 ] && [ "\$1" != -o ]; do shift; done
echo "cc \$2" >>$log
: >"\$2"
EOF
chmod +x "$fake"/*
nosudo=$(realpath "$tmp")/nosudo
mkdir -p "$nosudo" && for f in dpkg-query id apt-get cc; do ln -s "$fake/$f" "$nosudo/$f"; done
MAKE_BIN=$(command -v make)

# build uid missing fakes_dir goal: make in the sandbox as user uid, the packages missing not installed
build() {
  local uid=$1 missing=$2 dir=$3 goal=$4
  rm -f "$log" "$tmp/tree/run" "$tmp/tree/train" && : >"$log"
  (cd "$tmp/tree" && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS PATH="$dir:$(realpath ../tools)" FAKE_UID=$uid \
    FAKE_MISSING="$missing" CC=cc "$MAKE_BIN" --no-print-directory $goal >../out.txt 2>../err.txt)
}

build 1000 "" "$fake" ""
rc=$?
if [ $rc -eq 0 ] && ! grep -q "apt-get\|sudo" "$log" && grep -q "cc run" "$log" && grep -q "cc train" "$log"; then
  ok "everything installed: make builds run and train and never calls apt-get"
else bad "everything installed: exit $rc, $(cat "$log" "$tmp/err.txt")"; fi

build 0 "libopenblas-dev libopenblas0-openmp" "$fake" run
rc=$?
if [ $rc -eq 0 ] && [ "$(head -n 1 "$log")" = "apt-get update -q" ] && grep -q "^apt-get install -y -q libopenblas-dev libopenblas0-openmp$" "$log" &&
  [ "$(tail -n 1 "$log")" = "cc run" ] && ! grep -q sudo "$log"; then
  ok "root without OpenBLAS: make run installs it with apt-get before compiling"
else bad "root without OpenBLAS: exit $rc, $(cat "$log" "$tmp/err.txt")"; fi

build 1000 "zlib1g-dev" "$fake" train
rc=$?
if [ $rc -eq 0 ] && [ "$(head -n 2 "$log" | tr '\n' ' ')" = "sudo apt-get apt-get update -q " ] &&
  grep -q "^apt-get install -y -q zlib1g-dev$" "$log" && [ "$(tail -n 1 "$log")" = "cc train" ]; then
  ok "a user with sudo without zlib1g-dev: make train installs it through sudo before compiling"
else bad "a user with sudo: exit $rc, $(cat "$log" "$tmp/err.txt")"; fi

build 1000 "libopenblas-dev libopenblas0-openmp" "$nosudo" ""
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err.txt")" -eq 1 ] && [ ! -s "$log" ] &&
  grep -q "no root or sudo to install them: as root, run apt-get install libopenblas-dev libopenblas0-openmp" "$tmp/err.txt"; then
  ok "a user without root or sudo: make stops with one line naming the packages, before compiling"
else bad "a user without root or sudo: exit $rc, $(cat "$log" "$tmp/err.txt")"; fi

build 1000 "libopenblas-dev" "$nosudo" print-DEB_BUILD
rc=$?
if [ $rc -eq 0 ] && [ ! -s "$log" ]; then
  ok "a goal that builds nothing (make print-VAR) is not stopped by a missing package"
else bad "make print-DEB_BUILD: exit $rc, $(cat "$tmp/err.txt")"; fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]

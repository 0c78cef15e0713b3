# bench/lib.sh: helpers bench/run.sh and bench/mpi_scaling.sh share (sourced, from the top of
# the checkout).
# Result files hold "key value..." lines, possibly many runs appended: every value of field n
# (1 = first value) of key, then their median.
vals() { awk -v k="$2" -v n="${3:-1}" '$1 == k { print $(n + 1) }' "$1" 2> /dev/null; }
med() { vals "$@" | sort -g | awk '{ v[n++] = $1 } END { if (n) print (n % 2) ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'; }
# A Makefile variable's value (make print-VAR), to build with exactly its compiler, flags and BLAS.
mkvar() { make -s --no-print-directory "print-$1"; }

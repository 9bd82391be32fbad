#!/usr/bin/env bash
# The GPU test suite under NVIDIA Compute Sanitizer (memcheck): out-of-bounds and misaligned device
# accesses, and CUDA API errors, in the kernels and graphs the tests build and launch.
#
# Usage: scripts/compute_sanitizer.sh [LOG] [extra pytest arguments...]
#   LOG  where the sanitizer's report goes (default: compute-sanitizer.log in the current directory)
#   The test files or folders may be given among the extra arguments (default: tests), so the suite
#   can be split over several runs.
# Environment:
#   SANITIZER_SPLIT    file: one sanitizer process per test file, one after the other (see below)
#   COMPUTE_SANITIZER  the compute-sanitizer binary (default: found on PATH, then under
#                      $CUDA_HOME/bin and /usr/local/cuda*/bin, newest first)
#   SANITIZER_TOOL     memcheck (default), racecheck, initcheck or synccheck
#   PYTHON             the interpreter (default: python3)
# Exits with the status of the run: non-zero when a test failed or the sanitizer reported an error.
set -euo pipefail
cd "$(dirname "$0")/.."

LOG=${1:-compute-sanitizer.log}
[[ $# -gt 0 ]] && shift
PYTHON=${PYTHON:-python3}
TOOL=${SANITIZER_TOOL:-memcheck}

find_sanitizer() {
    if [[ -n "${COMPUTE_SANITIZER:-}" ]]; then
        echo "$COMPUTE_SANITIZER"
        return
    fi
    if command -v compute-sanitizer >/dev/null 2>&1; then
        command -v compute-sanitizer
        return
    fi
    local dir
    for dir in ${CUDA_HOME:+"$CUDA_HOME/bin"} ${CUDA_PATH:+"$CUDA_PATH/bin"} \
        $(ls -d /usr/local/cuda*/bin /opt/nvidia/*/compute-sanitizer 2>/dev/null | sort -V -r); do
        if [[ -x "$dir/compute-sanitizer" ]]; then
            echo "$dir/compute-sanitizer"
            return
        fi
    done
}

SANITIZER=$(find_sanitizer || true)
if [[ -z "$SANITIZER" || ! -x "$SANITIZER" ]]; then
    echo "compute_sanitizer: compute-sanitizer was not found (looked on PATH, in \$CUDA_HOME/bin and" >&2
    echo "/usr/local/cuda*/bin; it ships with the CUDA toolkit). Set COMPUTE_SANITIZER to its path." >&2
    exit 2
fi
echo "compute_sanitizer: $("$SANITIZER" --version | tail -n 1) ($SANITIZER), tool $TOOL, log $LOG"

# Test paths among the arguments replace the default folder; the rest are pytest options.
paths=()
options=()
for arg in "$@"; do
    if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then paths+=("$arg"); else options+=("$arg"); fi
done
[[ ${#paths[@]} -eq 0 ]] && paths=(tests)

status=0
# --target-processes all: the tests that start a fresh interpreter are checked too.
# Python's own exit may leave device allocations: only errors count, not leaks.
# --report-api-errors no: the bad-input tests provoke driver errors on purpose, and a kernel's parameter
# count is found by asking for one index past the last (see README); -k "not faulting" leaves out the
# test whose kernel writes out of bounds on purpose. Fewer soak rounds and generated graphs: the
# sanitizer slows every launch.
# Test buffers from cuMemAlloc instead of the stream-ordered pool (see GpuHelper.alloc in tests/conftest.py).
export CUDAGRAPH_TEST_ALLOC=${CUDAGRAPH_TEST_ALLOC:-plain}
export CUDAGRAPH_SOAK_ROUNDS=${CUDAGRAPH_SOAK_ROUNDS:-100} CUDAGRAPH_DIFF_EXAMPLES=${CUDAGRAPH_DIFF_EXAMPLES:-20}
export CUDAGRAPH_THREAD_LAUNCHES=${CUDAGRAPH_THREAD_LAUNCHES:-20}
sanitize() { # LOG PATHS...: one process under the sanitizer
    local log=$1
    shift
    PYTHONPATH=src "$SANITIZER" --tool "$TOOL" --target-processes all --log-file "$log" --print-limit 100 \
        --report-api-errors no --error-exitcode 99 \
        "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider "$@" -k "not faulting" ${options[@]+"${options[@]}"}
}
if [[ "${SANITIZER_SPLIT:-}" == file ]]; then
    # One process per test file (SANITIZER_SPLIT=file), one after the other: under memcheck, kernels that a
    # conditional node launches from the device have faulted in a process where other files' tests ran first
    # (CUDA_ERROR_ILLEGAL_ADDRESS with no memcheck report, or a read reported out of bounds at the very start
    # of a live allocation), while the same tests pass in a process of their own and outside the sanitizer.
    files=$(PYTHONPATH=src "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider --collect-only "${paths[@]}" \
        -k "not faulting" ${options[@]+"${options[@]}"} 2>/dev/null | grep "::" | sed 's/::.*//' | sort -u)
    : > "$LOG"
    for f in $files; do
        rc=0
        sanitize "$LOG.part" "$f" || rc=$?
        echo "compute_sanitizer: $f: status $rc"
        cat "$LOG.part" >> "$LOG"
        [[ $rc -ne 0 && ( $status -eq 0 || $rc -eq 99 ) ]] && status=$rc
    done
    rm -f "$LOG.part"
else
    sanitize "$LOG" "${paths[@]}" || status=$?
fi

# The summary line(s) the sanitizer writes: "========= ERROR SUMMARY: N errors".
summary=$(grep -E "ERROR SUMMARY" "$LOG" || true)
if [[ -n "$summary" ]]; then
    echo "$summary"
else
    echo "compute_sanitizer: no ERROR SUMMARY line in $LOG (did the run start?)" >&2
    [[ $status -eq 0 ]] && status=1
fi
case $status in
0) echo "compute_sanitizer: the GPU tests passed with no sanitizer error" ;;
99) echo "compute_sanitizer: the sanitizer reported errors (see $LOG)" >&2 ;;
*) echo "compute_sanitizer: the run failed with status $status (see $LOG and the pytest output above)" >&2 ;;
esac
exit "$status"

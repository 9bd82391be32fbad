#!/usr/bin/env bash
# The compiled modules (cudagraph.driver._native, cudagraph.definition._define) under AddressSanitizer and UndefinedBehaviorSanitizer.
#
# Builds the extension with -fsanitize=address,undefined into a temporary copy of the sources (the
# tree's own build is left alone), then runs the CPU tests of the compiled paths with the sanitizer
# runtime preloaded into the interpreter. Python objects are allocated with malloc
# (PYTHONMALLOC=malloc) so that a freed object read through a borrowed reference is a reported
# use-after-free, not a read of a recycled pymalloc block. Any sanitizer report fails the run, in the
# test process or in the subprocesses the hostile tests start (the reports go to log files, checked
# at the end). Leak detection is off: the interpreter keeps objects alive until exit by design.
#
# Usage: .ci/sanitize.sh [pytest arguments...]   (default: the tests listed below)
# Needs gcc (or clang) with the sanitizer runtimes, and the test extra (pytest, hypothesis).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}

CC_BIN=${CC:-gcc}
ASAN_LIB=$("$CC_BIN" -print-file-name=libasan.so)
if [[ "$ASAN_LIB" != /* || ! -e "$ASAN_LIB" ]]; then
    echo "sanitize: $CC_BIN has no libasan.so (install the compiler's sanitizer runtime)" >&2
    exit 2
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cudagraph-sanitize.XXXXXX")
trap '[[ -n "${SANITIZE_KEEP:-}" ]] || rm -rf "$WORK"' EXIT
mkdir -p "$WORK/logs"
cp -r setup.py pyproject.toml README.md src "$WORK/"
find "$WORK/src" \( -name '*.so' -o -name '__pycache__' \) -prune -exec rm -rf {} +

echo "sanitize: building cudagraph.driver._native with -fsanitize=address,undefined"
(
    cd "$WORK"
    SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    CC="$CC_BIN" CFLAGS="$SAN -g -O1" LDFLAGS="$SAN" \
        "$PYTHON" setup.py -q build_ext --inplace >"$WORK/logs/build.txt" 2>&1 || {
        cat "$WORK/logs/build.txt" >&2
        exit 1
    }
)
SO=$(ls "$WORK"/src/cudagraph/driver/_native*.so 2>/dev/null | head -n 1 || true)
if [[ -z "$SO" ]]; then # the extension is optional in setup.py: a failed build installs nothing
    echo "sanitize: the extension was not built:" >&2
    cat "$WORK/logs/build.txt" >&2
    exit 1
fi
# (nm's output is read whole first: `grep -q` closing the pipe early fails the pipeline under pipefail)
SYMBOLS=$(nm -D --undefined-only "$SO")
if ! grep -q __asan_ <<<"$SYMBOLS"; then
    echo "sanitize: $SO is not instrumented (CFLAGS were not applied)" >&2
    exit 1
fi

# libstdc++ beside the runtime: ASan's __cxa_throw interceptor finds the real one only if it is loaded at
# start, and C++ libraries the tests load (torch) throw and catch exceptions of their own.
PRELOAD=$ASAN_LIB
CXX_LIB=$("$CC_BIN" -print-file-name=libstdc++.so.6)
if [[ "$CXX_LIB" == /* && -e "$CXX_LIB" ]]; then
    PRELOAD="$PRELOAD:$CXX_LIB"
fi
export LD_PRELOAD="$PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}"
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:log_path=$WORK/logs/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$WORK/logs/ubsan"
export PYTHONMALLOC=malloc
export PYTHONPATH="$WORK/src"
unset CUDAGRAPH_NO_C_ENTRY

"$PYTHON" -c 'from cudagraph.driver import c_entry; assert c_entry.NATIVE is not None, "no compiled module"
import cudagraph.driver._native as m, sys; sys.exit(0 if m.__file__.startswith(sys.argv[1]) else "not the sanitized build")' "$WORK"
"$PYTHON" -c 'from cudagraph.definition.builders import COMPILED_KERNEL as k; assert k is not None, "no _define"
import cudagraph.definition._define as m, sys; sys.exit(0 if m.__file__.startswith(sys.argv[1]) else "not the sanitized build")' "$WORK"

if [[ $# -eq 0 ]]; then
    # Every test that drives the compiled module on the CPU: its own tests, and those of the layers
    # calling it (lowering with fake drivers, executable updates, rebinding plans, the cache).
    set -- tests/test_native_cpu.py tests/test_native_hostile.py tests/test_native_fuzz.py \
        tests/test_native_schema.py tests/test_bind_plan_cpu.py tests/test_updates_cpu.py \
        tests/test_cache_cpu.py tests/test_executable_parts_cpu.py tests/test_materializers_cpu.py \
        tests/test_lift_cpu.py tests/test_lift_compiled_cpu.py tests/test_stream_launch_cpu.py \
        tests/test_launch_targets_cpu.py \
        tests/test_patch_plan_cpu.py tests/test_parametrize_bind_cpu.py tests/test_stream_launch_hostile.py \
        tests/test_stream_launch_fuzz.py tests/test_define_compiled_cpu.py tests/test_definition_path_builders.py \
        tests/test_compat_launch_compiled_cpu.py tests/test_bind_many_cpu.py tests/test_bind_many_hostile.py \
        tests/test_native_gil_cpu.py tests/test_exec_launch_cpu.py tests/test_exec_launch_fuzz.py tests/test_held_calls_cpu.py \
        tests/test_native_simple_cpu.py tests/test_define_place_cpu.py tests/test_operand_fast_paths_cpu.py \
        tests/test_define_ops_cpu.py tests/test_stream_issue_simple_cpu.py tests/test_stream_issue_simple_fuzz.py \
        tests/test_successor_fold_cpu.py tests/test_validate_compiled_cpu.py tests/test_torch_args_cpu.py \
        tests/test_torch_operands_cpu.py tests/test_topology_record_cpu.py tests/test_remove_cpu.py
fi
# On every CPU where pytest-xdist is installed (each worker preloads the runtimes and logs reports alike).
workers=()
if "$PYTHON" -c "import xdist" 2>/dev/null; then
    workers=(-n auto)
fi
status=0
(cd "$ROOT" && "$PYTHON" -m pytest -q -p no:cacheprovider -o addopts="" "${workers[@]}" "$@") || status=$?

reports=$(ls "$WORK"/logs/asan* "$WORK"/logs/ubsan* 2>/dev/null || true)
if [[ -n "$reports" ]]; then
    echo "sanitize: sanitizer reports:" >&2
    for f in $reports; do
        echo "==== $f" >&2
        cat "$f" >&2
    done
    exit 1
fi
if [[ $status -ne 0 ]]; then
    echo "sanitize: the tests failed (exit status $status)" >&2
    exit "$status"
fi
echo "sanitize: 0 sanitizer reports"

#!/usr/bin/env bash
# The checks a GPU machine runs on a checkout, one after the other, each one's output in a log of its own:
#
#   suite      the GPU tests (python -m pytest -q -m gpu), with the compiled modules
#   suite_py   the same without them (CUDAGRAPH_NO_C_ENTRY=1: the Python twins), soak tests left out
#   memcheck   the compiled kinds', update, core, lift, parametrize and allocation-placement GPU tests under
#              Compute Sanitizer (scripts/compute_sanitizer.sh)
#   zoo        the model zoo: real torchvision, timm and transformers models captured by PyTorch, lifted
#              with verify=True and rebound (tests/test_model_zoo_gpu.py), then bench/zoo.py --quick and
#              bench/zoo_lift_profile.py (where the lift's time goes)
#   threads    the CPU tests of the GIL offers and the executable's lock, on this machine's Python
#   demo       python -m cudagraph demo
#   bench      bench/construction.py --quick, bench/launch_targets.py, bench/rebind_lifted.py,
#              bench/materializers.py --quick, bench/build_beside_thread.py, bench/multi_gpu.py
#
# Usage: scripts/gpu_check.sh [OUTDIR] [STAGE...]   (default: ./gpu-check, every stage)
# Runs from a checkout without installing it (PYTHONPATH=src); builds the compiled modules in place first
# when a C compiler is there. Prints one line per stage (its status and the last line of its log) and exits
# with the first non-zero status (3: a suite stage ran no test, every one skipped: no GPU). PYTHON picks the
# interpreter (default: python3).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-gpu-check}
[[ $# -gt 0 ]] && shift
STAGES=("$@")
[[ ${#STAGES[@]} -eq 0 ]] && STAGES=(suite suite_py memcheck zoo threads demo bench)
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH=src

if command -v "${CC:-cc}" >/dev/null 2>&1; then
    "$PYTHON" setup.py -q build_ext --inplace >"$OUT/build.log" 2>&1 || echo "gpu_check: the build failed (see $OUT/build.log)"
fi

run_stage() {
    case $1 in
    suite) "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider -rs ;;
    suite_py) CUDAGRAPH_NO_C_ENTRY=1 "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider -rs -k "not no_growth and not soak" ;;
    memcheck)
        PYTHON=$PYTHON scripts/compute_sanitizer.sh "$OUT/memcheck-report.log" tests/test_compiled_kinds_gpu.py \
            tests/test_gpu_updates.py tests/test_gpu_core.py tests/test_gpu_lift.py tests/test_parametrize_gpu.py \
            tests/test_alloc_placement_gpu.py
        ;;
    zoo)
        "$PYTHON" -m pytest -q -p no:cacheprovider -rs tests/test_model_zoo_gpu.py && "$PYTHON" bench/zoo.py --quick &&
            "$PYTHON" bench/zoo_lift_profile.py resnet50 embedding_bag
        ;;
    threads)
        "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_loop_gil_cpu.py tests/test_lift_gil_cpu.py \
            tests/test_exec_lock_cpu.py tests/test_native_gil_cpu.py tests/test_launch_gil_cpu.py
        ;;
    demo) "$PYTHON" -m cudagraph demo ;;
    bench)
        "$PYTHON" bench/construction.py --quick && "$PYTHON" bench/launch_targets.py &&
            "$PYTHON" bench/rebind_lifted.py && "$PYTHON" bench/materializers.py --quick &&
            "$PYTHON" bench/build_beside_thread.py && "$PYTHON" bench/multi_gpu.py
        ;;
    *)
        echo "gpu_check: unknown stage $1 (suite, suite_py, memcheck, zoo, threads, demo, bench)"
        return 2
        ;;
    esac
}

status=0
for stage in "${STAGES[@]}"; do
    start=$SECONDS
    run_stage "$stage" >"$OUT/$stage.log" 2>&1
    rc=$?
    if [[ $rc -eq 0 && ($stage == suite* || $stage == zoo) ]] && ! grep -q " passed" "$OUT/$stage.log"; then
        rc=3 # every GPU test skipped (no GPU here): not a pass
    fi
    echo "gpu_check: $stage: status $rc in $((SECONDS - start)) s: $(tail -n 1 "$OUT/$stage.log")"
    [[ $rc -ne 0 && $status -eq 0 ]] && status=$rc
done
exit "$status"

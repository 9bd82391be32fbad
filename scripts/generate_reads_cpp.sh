#!/usr/bin/env bash
# Generate src/cudagraph/driver/_reads.cpp (the C++ of the Cython module cudagraph.driver._reads) against the
# cydriver.pxd of a given cuda-bindings version, for a machine that has that version but no Cython: copy the
# checkout there with the generated file beside _reads.pyx, and `python setup.py build_ext --inplace` compiles
# it (setup.py reads the stamp on its last line: the sources' hash and the cuda-bindings version).
#
# Usage: scripts/generate_reads_cpp.sh VERSION      (e.g. 13.3.1: the target machine's `pip show cuda-bindings`)
# Needs Cython and pip with access to the package index. The cuda.h it compiles the local copy against comes
# from the cuda-toolkit[cudart] wheel of the newest CUDA of that major (at least as new as its cydriver.pxd).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:?usage: scripts/generate_reads_cpp.sh CUDA_BINDINGS_VERSION}
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PYTHON" -m pip install -q --target "$WORK/site" "cuda-bindings==$VERSION" "cuda-toolkit[cudart]==${VERSION%%.*}.*"
mkdir -p "$WORK/cuda/include"
cp -r "$(ls -d "$WORK"/site/nvidia/cu*/include | head -n 1)"/. "$WORK/cuda/include/"
# cydriver.pxd also includes the profiler API's header, which the runtime wheel may lack: take a local toolkit's
# (its declarations have not changed across CUDA 12 and 13).
if [[ ! -f "$WORK/cuda/include/cudaProfiler.h" ]]; then
    found=$(ls /usr/local/cuda*/include/cudaProfiler.h "${CUDA_HOME:-/nonexistent}/include/cudaProfiler.h" 2>/dev/null | head -n 1 || true)
    [[ -n "$found" ]] || { echo "generate_reads_cpp: no cudaProfiler.h here (install a CUDA toolkit)" >&2; exit 1; }
    cp "$(dirname "$found")"/cudaProfiler*.h "$WORK/cuda/include/"
fi
rm -f src/cudagraph/driver/_reads.cpp
PYTHONPATH="$WORK/site" CUDA_HOME="$WORK/cuda" "$PYTHON" setup.py -q build_ext --inplace
tail -n 1 src/cudagraph/driver/_reads.cpp

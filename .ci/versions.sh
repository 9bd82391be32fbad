#!/usr/bin/env bash
# The other Python versions the package claims (requires-python >= 3.10), where this machine has them: a
# fresh venv, the package installed from this tree (its compiled modules built for that version and
# imported), the test suite run (GPU tests skip) on every CPU (pytest-xdist: the README's command runs once,
# serially, in .ci/run). A version this machine lacks is named as untested.
set -euo pipefail
cd "$(dirname "$0")/.."
for v in ${CUDAGRAPH_CI_VERSIONS:-3.10 3.13}; do
    py="python$v"
    if ! "$py" -c "" 2>/dev/null && command -v pyenv >/dev/null; then # installed by pyenv but not active
        py=$(ls -d "$(pyenv root)/versions/$v".*/bin/python 2>/dev/null | tail -1 || true)
    fi
    if [ -z "$py" ] || ! "$py" -c "import venv, ensurepip" 2>/dev/null; then
        echo "versions: python$v is not on this machine: not tested"
        continue
    fi
    dir=$(mktemp -d)
    "$py" -m venv "$dir/venv"
    "$dir/venv/bin/python" -m pip install -q --upgrade pip
    "$dir/venv/bin/python" -m pip install -q ".[test]" "pytest-xdist>=3.5"
    "$dir/venv/bin/python" -c "import cudagraph.driver._native, cudagraph.definition._define"
    echo "versions: python$v ($("$dir/venv/bin/python" -V)): compiled modules built and imported"
    "$dir/venv/bin/python" -m pytest -q -p no:cacheprovider -n auto
    rm -rf "$dir"
done

#!/usr/bin/env bash
# The package where no compiler is found: the committed tree (git archive, as an sdist holds it: no build
# outputs) installed into a fresh venv with the C and C++ compilers made to fail. The install must succeed with
# every compiled module left out, `python -m cudagraph info` must say why, and the suite must pass on the
# Python paths (the tests of the compiled modules skip, naming the module).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
git archive HEAD | tar -x -C "$dir"
python3 -m venv "$dir/venv"
py="$dir/venv/bin/python"
"$py" -m pip install -q --upgrade pip
(cd "$dir" && CC=/bin/false CXX=/bin/false "$py" -m pip install -q ".[test]" "pytest-xdist>=3.5")
if "$py" -c "import cudagraph.driver._native" 2>/dev/null; then
    echo "nocompiler: cudagraph.driver._native was built although no compiler works" >&2
    exit 1
fi
info=$(cd "$dir" && "$py" -m cudagraph info)
if ! grep -q "compiled module: not built (it needs a C compiler" <<<"$info"; then
    echo "nocompiler: info does not say why the compiled module is absent:" >&2
    echo "$info" >&2
    exit 1
fi
echo "nocompiler: installed with no compiler; info: $(grep '^compiled module' <<<"$info")"
(cd "$dir" && "$py" -m pytest -q -p no:cacheprovider -n auto)
rm -rf "$dir"

#!/usr/bin/env bash
# The DOT and Mermaid texts read by the real parsers: Graphviz (compiled to WebAssembly, @viz-js/viz,
# where no `dot` is installed) and Mermaid 11 (mermaid.parse under jsdom), both under node.
# Needs node and npm with access to the npm registry; says so and stops (status 0) where there is none,
# so a machine without them still runs the rest of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "parsers: SKIPPED: node and npm are not installed; the DOT/Mermaid parser tests did not run" >&2
    exit 0
fi
dir=${CUDAGRAPH_MERMAID_DIR:-$(mktemp -d)}
if [[ ! -d "$dir/node_modules/mermaid" || ! -d "$dir/node_modules/jsdom" || ! -d "$dir/node_modules/@viz-js/viz" ]]; then
    if ! (cd "$dir" && timeout 300 npm install --no-audit --no-fund --silent mermaid@11 jsdom @viz-js/viz@3); then
        echo "parsers: SKIPPED: npm could not install mermaid, jsdom and @viz-js/viz; the parser tests did not run" >&2
        exit 0
    fi
fi
out=$(CUDAGRAPH_MERMAID_DIR="$dir" python -m pytest -q -p no:cacheprovider -rs tests/test_render_pictures.py \
    -k "graphviz or mermaid_parser" 2>&1) || { echo "$out"; exit 1; }
echo "$out" | tail -n 3
# Every parser test ran: none may skip here.
if echo "$out" | grep -q "skipped"; then
    echo "parsers: some parser tests skipped although the parsers were installed" >&2
    exit 1
fi

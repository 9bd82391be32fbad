#!/usr/bin/env bash
# The documentation site: installs the docs extra into the active venv and builds with warnings as
# errors (a broken link, a missing page, a docstring mkdocstrings cannot read). Its code blocks run
# as tests in tests/test_docs.py. The site is built in a temporary folder, removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The docs extra's requirements only: the package itself is installed already, and mkdocstrings
# reads its source from src/.
python - <<'PY' > "$work/requirements.txt"
import tomllib

with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["docs"]))
PY
python -m pip install -q -r "$work/requirements.txt"
NO_MKDOCS_2_WARNING=1 mkdocs build --strict --site-dir "$work/site"
echo "docs: built $(find "$work/site" -name '*.html' | wc -l) pages with mkdocs build --strict"

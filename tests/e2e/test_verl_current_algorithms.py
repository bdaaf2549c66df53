"""GDPO, SAPO and on-policy distillation, each trained two steps from its published verl script (verl-project/verl
examples after the April 2026 reorganisation, fixtured under tests/fixtures/launch_scripts/verl_2026_08), at
the CPU size of tests/e2e/test_launch_scripts_train.py (``cpu_scale``), on the session's warm workers. The math
is checked against hand-computed values in tests/algorithms (test_gdpo, test_sapo, test_distillation_loss); here
each run shows the algorithm at work in a real job.
"""

import pytest

from .e2e_helpers import read_metrics
from .test_launch_scripts_train import _prompts_per_step, cpu_scale, replay_helpers

pytestmark = pytest.mark.slow

SCRIPTS = {
    "gdpo": "verl_2026_08/examples/gdpo_trainer/run_qwen3_8b_fsdp",
    "sapo": "verl_2026_08/examples/sapo_trainer/run_qwen3_8b_fsdp",
    "distillation": "verl_2026_08/examples/on_policy_distillation_trainer/run_qwen3_8b_fsdp",
}
#: Stands in for the GDPO script's score function (verl's rlla.py, a tool-call rubric): the same dict shape, the
#: two components the script's ``gdpo_reward_keys`` name, on the embedded addition task.
RUBRIC = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    answer = solution_str.strip()
    accuracy = float(answer == str(ground_truth).strip())
    form = float(answer.isdigit())
    return {"score": accuracy + form, "accuracy_reward": accuracy, "format_reward": form}
'''


TEACHER_KEY = "distillation.teacher_models.teacher_model.model_path"


def _other_teacher(folder) -> str:
    """The embedded model with every weight nudged (seeded noise): a teacher that disagrees with the student's
    start, standing in for the script's larger Qwen3 (the replay's teacher is the embedded model itself)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from siirl.embedded_assets import default_model_path

    model = AutoModelForCausalLM.from_pretrained(default_model_path(), dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=generator))
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(default_model_path()).save_pretrained(folder)
    return str(folder)


def _train(name: str, tmp_path, monkeypatch) -> list[dict]:
    from siirl.main_dag import main

    scaled = cpu_scale(replay_helpers.load_fixture(name)["invocations"][0]["overrides"])
    data = replay_helpers.write_task_data(tmp_path / "data", train_rows=2 * _prompts_per_step(scaled), val_rows=16)
    run_dir = tmp_path / "run"
    extra = [*scaled, "trainer.total_training_steps=2", f"trainer.output_dir={run_dir}"]
    (replay,) = replay_helpers.replays(name, tmp_path, data, extra)
    rubric = tmp_path / "rubric.py"
    rubric.write_text(RUBRIC, encoding="utf-8")
    swaps = {"reward.custom_reward_function.path": str(rubric)}
    if any(o.startswith(TEACHER_KEY + "=") for o in replay.overrides):
        swaps[TEACHER_KEY] = _other_teacher(tmp_path / "teacher")
    overrides = [f"{o.partition('=')[0]}={swaps[o.partition('=')[0]]}" if o.partition("=")[0] in swaps else o
                 for o in replay.overrides]
    monkeypatch.chdir(replay.cwd)
    assert main(overrides) == 0
    steps = [r for r in read_metrics(run_dir) if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    return steps


@pytest.mark.parametrize("algorithm", sorted(SCRIPTS))
def test_two_steps_of_the_published_script(algorithm, tmp_path, ray_session, monkeypatch):
    steps = _train(SCRIPTS[algorithm], tmp_path, monkeypatch)
    for step in steps:
        if algorithm == "gdpo":
            # the rubric's components reached the advantage node, which whitens their weighted sum per batch
            assert {"reward_extra/accuracy_reward", "reward_extra/format_reward"} <= set(step)
            assert abs(step["advantages/mean"]) < 1e-5
        elif algorithm == "sapo":
            assert step["actor/pg_clipfrac"] == 0.0  # a soft gate clips nothing
        else:
            # the student trains on the distillation term alone (the script's use_task_rewards=False): the
            # teacher's log-probs are what give it a gradient
            assert "timing_s/teacher" in step and step["distillation/abs_loss"] > 0.01
            assert step["actor/grad_norm"] > 0.0

"""Two GRPO steps of tool-calling multi-turn rollouts through ``python -m siirl.main_dag``, with the keys
verl's GSM8K tool script sets (model and data swapped for a tool-calling copy of the embedded model and a
GSM8K-style parquet of additions); and two steps of verl's interaction workflow (a simulated gsm8k user
answering every turn) on the embedded model, with the same keys and data."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from .e2e_helpers import read_metrics, run_main
from .gsm8k_tool_yaml import GSM8K_TOOL_YAML
from .tool_model import build_tool_model

pytestmark = pytest.mark.slow

#: What both workflows set, as verl's gsm8k multi-turn scripts do.
MULTI_TURN_KEYS = (
    "algorithm.adv_estimator=grpo", "data.max_prompt_length=48", "data.max_response_length=96",
    "data.filter_overlong_prompts=True", "data.truncation=error", "data.return_raw_chat=True",
    "actor_rollout_ref.actor.use_kl_loss=True", "actor_rollout_ref.actor.kl_loss_coef=0.001",
    "actor_rollout_ref.actor.kl_loss_type=low_var_kl", "actor_rollout_ref.actor.entropy_coeff=0",
    "actor_rollout_ref.rollout.temperature=0.2", "actor_rollout_ref.rollout.multi_turn.enable=True",
    "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2",
    "actor_rollout_ref.rollout.multi_turn.max_observation_length=128", "data.val_batch_size=8",
)


def write_rows(path: Path, pairs, data_source: str = "openai/gsm8k") -> str:
    """Additions as verl's gsm8k multi-turn preprocessing writes them: ``tools_kwargs`` for the gsm8k tool
    and ``interaction_kwargs`` for the gsm8k user."""
    rows = [{
        "data_source": data_source,
        "prompt": [{"role": "user", "content": f"{a}+{b}="}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": str(a + b)},
        "extra_info": {
            "split": "train", "index": i,
            "tools_kwargs": {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": str(a + b)}}},
            "interaction_kwargs": {"name": "gsm8k", "query": f"{a}+{b}=", "ground_truth": str(a + b)},
        },
    } for i, (a, b) in enumerate(pairs)]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def data_keys(folder: Path, data_source: str = "openai/gsm8k") -> list[str]:
    train = write_rows(folder / "train.parquet", [(a, 42 - a) for a in range(16)] + [(a, 7) for a in range(16)],
                       data_source)
    val = write_rows(folder / "val.parquet", [(a, 42 - a) for a in range(20, 28)], data_source)
    return [f"data.train_files={train}", f"data.val_files=[{val}]"]


def test_gsm8k_tool_workflow_trains_two_steps(tmp_path, ray_session):
    torch.set_num_threads(1)
    model, _ = build_tool_model(tmp_path / "tool_model")
    tools = tmp_path / "gsm8k_tool_config.yaml"
    tools.write_text(GSM8K_TOOL_YAML)
    run_dir = tmp_path / "run"
    code = run_main(
        run_dir, "trainer.total_training_steps=2", *MULTI_TURN_KEYS, *data_keys(tmp_path),
        f"actor_rollout_ref.model.path={model}", f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tools}",
        "trainer.val_before_train=True",
    )
    assert code == 0
    steps = [r for r in read_metrics(run_dir) if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for record in steps:
        # tools/calls is the workers' mean count over each one's 16 trajectories: most of them called the tool
        assert record["tools/calls"] > 8, record
        assert record["tools/timeouts"] == 0.0 and record["env/errors"] == 0.0
        assert record["env/turns"] > 1.0  # a tool turn, then the policy's next turn
    assert any("val/score" in r for r in read_metrics(run_dir))


def test_gsm8k_interaction_workflow_trains_two_steps(tmp_path, ray_session):
    """verl's ``gsm8k_interaction_config.yaml`` without tools (its ``w_interaction`` config): the embedded
    model answers each addition, the gsm8k user replies to each answer, the policy answers again."""
    torch.set_num_threads(1)
    interaction = tmp_path / "gsm8k_interaction_config.yaml"
    interaction.write_text(yaml.safe_dump({"interaction": [
        {"name": "gsm8k", "class_name": "verl.interactions.gsm8k_interaction.Gsm8kInteraction", "config": {}},
    ]}))
    run_dir = tmp_path / "run"
    code = run_main(
        run_dir, "trainer.total_training_steps=2", *MULTI_TURN_KEYS, *data_keys(tmp_path, "siirl/arith_add"),
        f"actor_rollout_ref.rollout.multi_turn.interaction_config_path={interaction}",
        "actor_rollout_ref.rollout.multi_turn.max_user_turns=1",
    )
    assert code == 0
    steps = [r for r in read_metrics(run_dir) if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for record in steps:
        # each DAG worker's 16 trajectories: the user answers every first turn; a right answer ends the
        # episode, a wrong one gets a second turn (and max_user_turns=1 ends it there)
        assert record["interaction/turns"] >= 16.0 and record["interaction/errors"] == 0.0, record
        assert 1.0 < record["env/turns"] <= 2.0 and record["env/errors"] == 0.0, record
        assert record["reward/max"] > 0.0, record  # some answers are right: the user's score reaches the reward
